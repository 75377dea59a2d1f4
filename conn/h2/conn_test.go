package h2

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/connactor/connactor/internal/errs"
)

func TestConnCarries100ConcurrentStreamsOnOneConnection(t *testing.T) {
	const n = 100
	var arrived atomic.Int32
	all := make(chan struct{})
	ts, conns := startH2(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if arrived.Add(1) == n {
			close(all) // all n handlers are running at once, on the server's side
		}
		select {
		case <-all:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, r.RemoteAddr)
	}))
	c := newConn(t, dialH2(t, ts, ts.Listener.Addr().String()), Options{}, nil)

	var wg sync.WaitGroup
	var done atomic.Int32
	addrs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() { // owned by the test: wg
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
			resp, err := c.RoundTrip(req, EndFunc(func(err error) {
				if err != nil {
					t.Errorf("stream %d ended with %v", i, err)
				}
				done.Add(1)
			}))
			if err != nil {
				errs[i] = err
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			addrs[i], errs[i] = string(b), err
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if addrs[i] != addrs[0] {
			t.Fatalf("request %d came from %s, request 0 from %s", i, addrs[i], addrs[0])
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("server accepted %d connections, want 1", got)
	}
	if got := done.Load(); got != n {
		t.Errorf("Done fired %d times, want %d", got, n)
	}
	if s := c.Streams(); s.Active != 0 || s.Available != s.Limit {
		t.Errorf("after all bodies closed: %+v", s)
	}
}

func TestConnAssumes100StreamsUntilTheServersSettingsArrive(t *testing.T) {
	ts, _ := startH2(t, &http.HTTP2Config{MaxConcurrentStreams: 4}, http.NotFoundHandler())
	tc, gate := dialH2Gated(t, ts)
	// From here on the client hears nothing from the server: whatever it sent
	// after the handshake (its SETTINGS, the PING ack) is held.
	gate.Hold()
	rec := newRecorder()
	c := newConn(t, tc, Options{}, rec)

	s := c.Streams()
	if s.Limit != 100 || s.Settings || s.Available != 100 {
		t.Fatalf("before the server's SETTINGS: %+v, want 100 assumed", s)
	}

	gate.Release()
	got := waitFor(t, rec.streams, "StreamsChanged after the SETTINGS")
	if got.Limit != 4 || !got.Settings || got.Available != 4 {
		t.Fatalf("StreamsChanged %+v, want the server's 4", got)
	}
	if s := c.Streams(); s.Limit != 4 || s.Available != 4 {
		t.Fatalf("after the SETTINGS: %+v, want the server's 4", s)
	}
}

func TestAColdStartAboveTheServersLimitIsRefusedSafelyAndKeepsTheConnection(t *testing.T) {
	const limit, burst = 4, 20
	release := make(chan struct{})
	ts, _ := startH2(t, &http.HTTP2Config{MaxConcurrentStreams: limit}, http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			fmt.Fprint(w, "ok")
		}))
	tc, gate := dialH2Gated(t, ts)
	gate.Hold() // the server's SETTINGS (4 streams) reach the client late
	rec := newRecorder()
	c := newConn(t, tc, Options{}, rec)

	// All 20 go out under the 100 assumed streams; the server runs 4 and
	// refuses the others (its SETTINGS are not acknowledged yet).
	errs := make(chan error, burst)
	wrote := make(chan struct{}, burst)
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteHeaders: func() { wrote <- struct{}{} },
	})
	var wg sync.WaitGroup
	for range burst {
		wg.Add(1)
		go func() { // owned by the test: wg
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL, nil)
			resp, err := c.RoundTrip(req, nil)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	for range burst {
		waitFor(t, wrote, "the burst's HEADERS to be written")
	}
	gate.Release()
	for range burst - limit {
		assertNotSent(t, waitFor(t, errs, "a refused request"), ErrRefused)
	}
	close(release)
	wg.Wait()
	for range limit {
		if err := <-errs; err != nil {
			t.Errorf("a request the server ran: %v", err)
		}
	}
	if s := c.Streams(); s.Draining || s.Limit != limit || s.Available != limit {
		t.Errorf("after the cold start: %+v, want a healthy connection with the server's %d streams", s, limit)
	}
}

func TestConnCapsStreamsAtTheLocalMaxConcurrentStreams(t *testing.T) {
	ts, _ := startH2(t, &http.HTTP2Config{MaxConcurrentStreams: 4}, http.NotFoundHandler())
	rec := newRecorder()
	c := newConn(t, dialH2(t, ts, ts.Listener.Addr().String()),
		Options{HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 2}}, rec)
	if s := c.Streams(); s.Limit != 2 {
		t.Fatalf("local cap 2 before SETTINGS: %+v", s)
	}
	got := waitFor(t, rec.streams, "StreamsChanged after the SETTINGS")
	if got.Limit != 2 || !got.Settings {
		t.Fatalf("StreamsChanged %+v, want min(4, 2)", got)
	}
	if s := c.Streams(); s.Available != 2 {
		t.Fatalf("want exactly 2 streams available: %+v", s)
	}
}

func TestRoundTripFailsWithoutAStreamAndNothingIsSent(t *testing.T) {
	var served atomic.Int32
	ts, _ := startH2(t, nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		fmt.Fprint(w, "ok")
	}))
	c := newConn(t, dialH2(t, ts, ts.Listener.Addr().String()),
		Options{HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 1}}, nil)
	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	first, err := c.RoundTrip(req, nil) // its body holds the only stream
	if err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest(http.MethodPost, ts.URL, nil)
	_, err = c.RoundTrip(req, nil)
	assertNotSent(t, err, ErrNoStream)
	if s := c.Streams(); s.Available != 0 {
		t.Errorf("a full connection has streams available: %+v", s)
	}
	first.Body.Close()
	if got := served.Load(); got != 1 {
		t.Errorf("server served %d requests, want 1", got)
	}
	if s := c.Streams(); s.Available != 1 {
		t.Errorf("no stream available once the stream ended: %+v", s)
	}
}

func TestResponseIsHTTP2WithTLSState(t *testing.T) {
	ts, _ := startH2(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.Proto)
	}))
	c := newConn(t, dialH2(t, ts, ts.Listener.Addr().String()), Options{}, nil)
	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	resp, err := c.RoundTrip(req, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Proto != "HTTP/2.0" || resp.ProtoMajor != 2 || string(b) != "HTTP/2.0" {
		t.Errorf("Proto %q ProtoMajor %d, server saw %q", resp.Proto, resp.ProtoMajor, b)
	}
	if resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" {
		t.Errorf("resp.TLS = %+v, want the connection's state with ALPN h2", resp.TLS)
	}
	if resp.Request != req {
		t.Error("resp.Request is not the request")
	}
}

func TestConnSpeaksH2CWithPriorKnowledge(t *testing.T) {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.Proto)
	}))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Start()
	t.Cleanup(ts.Close)
	nc, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := newConn(t, nc, Options{}, nil)
	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	resp, err := c.RoundTrip(req, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || string(b) != "HTTP/2.0" || resp.TLS != nil {
		t.Errorf("ProtoMajor %d, server saw %q, TLS %v", resp.ProtoMajor, b, resp.TLS)
	}
}

func TestNewRefusesATLSConnectionThatChoseHTTP1(t *testing.T) {
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS() // no EnableHTTP2: ALPN picks http/1.1
	t.Cleanup(ts.Close)
	tc := dialH2(t, ts, ts.Listener.Addr().String())
	_, err := New(tc, Options{})
	if !errors.Is(err, ErrNotH2) {
		t.Fatalf("New = %v, want ErrNotH2", err)
	}
	if _, werr := tc.Write([]byte("x")); !errors.Is(werr, net.ErrClosed) {
		t.Errorf("the connection was left open (write: %v)", werr)
	}
}

func TestDoneFiresOnceAndHeadEndsTheStreamAtOnce(t *testing.T) {
	ts, _ := startH2(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello")
	}))
	c := newConn(t, dialH2(t, ts, ts.Listener.Addr().String()), Options{}, nil)

	var calls atomic.Int32
	done := func(err error) {
		if err != nil {
			t.Errorf("Done(%v)", err)
		}
		calls.Add(1)
	}
	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	resp, err := c.RoundTrip(req, EndFunc(done))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Streams(); s.Active != 1 {
		t.Errorf("while the body is open: %+v", s)
	}
	io.ReadAll(resp.Body) // EOF ends the stream
	resp.Body.Close()     // and Close does not end it again
	resp.Body.Close()
	if got := calls.Load(); got != 1 {
		t.Errorf("Done fired %d times after EOF and two Closes", got)
	}

	req, _ = http.NewRequest(http.MethodHead, ts.URL, nil)
	resp, err = c.RoundTrip(req, EndFunc(done))
	if err != nil {
		t.Fatal(err)
	}
	if got := calls.Load(); got != 2 || resp.Body != http.NoBody {
		t.Errorf("HEAD: Done fired %d times in all, body %T", got, resp.Body)
	}
	if s := c.Streams(); s.Active != 0 {
		t.Errorf("after HEAD: %+v", s)
	}
}

// assertNotSent checks that err is a *RoundTripError that is safe to replay
// anywhere, for the reason kind.
func assertNotSent(t *testing.T, err, kind error) {
	t.Helper()
	var rt *RoundTripError
	if !errors.As(err, &rt) || rt.Sent {
		t.Fatalf("error %v (%T), want an unsent *RoundTripError", err, err)
	}
	if !errors.Is(err, kind) || !errors.Is(err, errs.ErrNotSent) || errors.Is(err, errs.ErrOutcomeUnknown) {
		t.Fatalf("error %v: want %v and errs.ErrNotSent only", err, kind)
	}
}
