package h2

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/errs"
)

func TestAbortingOneStreamResetsOnlyThatStream(t *testing.T) {
	reset := make(chan struct{})
	release := make(chan struct{})
	ts, conns := startH2(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		fmt.Fprint(w, "first part;")
		w.(http.Flusher).Flush()
		switch r.URL.Path {
		case "/aborted":
			<-r.Context().Done() // the client's RST_STREAM
			close(reset)
		case "/other":
			<-release
			fmt.Fprint(w, "rest")
		}
	}))
	rec := newRecorder()
	c := newConn(t, dialH2(t, ts, ts.Listener.Addr().String()), Options{}, rec)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	abortedDone := make(chan error, 1)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/aborted", nil)
	aborted, err := c.RoundTrip(req, EndFunc(func(err error) { abortedDone <- err }))
	if err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest(http.MethodGet, ts.URL+"/other", nil)
	other, err := c.RoundTrip(req, nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("first part;"))
	if _, err := io.ReadFull(aborted.Body, buf); err != nil {
		t.Fatal(err)
	}

	cancel()
	if _, err := io.ReadAll(aborted.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("reading the aborted body: %v, want context.Canceled", err)
	}
	if err := waitFor(t, abortedDone, "Done of the aborted stream"); !errors.Is(err, context.Canceled) {
		t.Errorf("Done(%v), want context.Canceled", err)
	}
	aborted.Body.Close()
	waitFor(t, reset, "the server to see the stream reset")

	close(release)
	b, err := io.ReadAll(other.Body)
	other.Body.Close()
	if err != nil || string(b) != "first part;rest" {
		t.Errorf("the other stream: %q, %v", b, err)
	}
	if _, body, err := get(t, c, ts.URL+"/new"); err != nil || body != "first part;" {
		t.Errorf("a new stream after the abort: %q, %v", body, err)
	}
	select {
	case ev := <-rec.closed:
		t.Errorf("the connection closed (%q, %v)", ev.reason, ev.err)
	default:
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("server accepted %d connections, want 1", got)
	}
	if s := c.Streams(); s.Active != 0 {
		t.Errorf("streams left active: %+v", s)
	}
}

func TestPingTimeoutClosesTheConnectionWithReasonPingTimeout(t *testing.T) {
	ts, _ := startH2(t, nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	tc, gate := dialH2Gated(t, ts)
	rec := newRecorder()
	c := newConn(t, tc, Options{HTTP2: &http.HTTP2Config{
		SendPingTimeout: 200 * time.Millisecond, // a PING after this long without a frame
		PingTimeout:     time.Second,            // and the connection is lost without its ack
	}}, rec)
	if _, body, err := get(t, c, ts.URL); err != nil || body != "ok" {
		t.Fatalf("GET = %q, %v", body, err)
	}

	gate.Hold() // the server stops answering, as far as the client can tell
	got := waitFor(t, rec.closed, "Closed after the lost PING")
	if got.reason != ReasonPingTimeout {
		t.Errorf("Closed(%q, %v), want ping_timeout", got.reason, got.err)
	}
	_, _, err := get(t, c, ts.URL)
	assertNotSent(t, err, ErrNoStream)
}

func TestResponseHeaderTimeoutFailsOnlyThatStream(t *testing.T) {
	release := make(chan struct{})
	ts, _ := startH2(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(func() { close(release) })
	rec := newRecorder()
	c := newConn(t, dialH2(t, ts, ts.Listener.Addr().String()),
		Options{ResponseHeaderTimeout: 50 * time.Millisecond}, rec)

	_, _, err := get(t, c, ts.URL+"/slow")
	if !errors.Is(err, errs.ErrResponseHeaderTimeout) || !errors.Is(err, errs.ErrOutcomeUnknown) {
		t.Fatalf("GET /slow = %v, want ErrResponseHeaderTimeout, outcome unknown", err)
	}
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Errorf("%v is not a net.Error with Timeout()", err)
	}
	if _, body, err := get(t, c, ts.URL+"/fast"); err != nil || body != "ok" {
		t.Errorf("the connection after the timeout: %q, %v", body, err)
	}
	if s := c.Streams(); s.Closed || s.Active != 0 {
		t.Errorf("after the timeout: %+v", s)
	}
}

func TestResponseHeaderLargerThanTheLimitFails(t *testing.T) {
	ts, _ := startH2(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			fmt.Fprint(w, "ok")
			return
		}
		// Many fields, each under the limit: a single field longer than the
		// whole limit is an HPACK error that costs the connection, in x/net
		// as in net/http.
		for i := range 100 {
			w.Header().Set(fmt.Sprintf("X-Field-%d", i), strings.Repeat("x", 100))
		}
		fmt.Fprint(w, "ok")
	}))
	c := newConn(t, dialH2(t, ts, ts.Listener.Addr().String()), Options{MaxResponseHeaderBytes: 4 << 10}, nil)
	_, _, err := get(t, c, ts.URL+"/big")
	if !errors.Is(err, errs.ErrResponseHeaderTooLarge) || !errors.Is(err, errs.ErrOutcomeUnknown) {
		t.Fatalf("GET = %v, want ErrResponseHeaderTooLarge, outcome unknown", err)
	}
	if _, body, err := get(t, c, ts.URL+"/small"); err != nil || body != "ok" {
		t.Errorf("the connection after the large head: %q, %v", body, err)
	}
}

// traceRecorder records the exchange's httptrace hooks, in any order (the
// engine fires them from the writer and the reader goroutines).
type traceRecorder struct {
	mu  sync.Mutex
	got []string
}

func (r *traceRecorder) add(s string) {
	r.mu.Lock()
	r.got = append(r.got, s)
	r.mu.Unlock()
}

func (r *traceRecorder) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		WroteHeaderField: func(k string, _ []string) { r.add("WroteHeaderField " + k) },
		WroteHeaders:     func() { r.add("WroteHeaders") },
		Wait100Continue:  func() { r.add("Wait100Continue") },
		Got100Continue:   func() { r.add("Got100Continue") },
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
			r.add(fmt.Sprint("Got1xxResponse ", code))
			return nil
		},
		WroteRequest:         func(i httptrace.WroteRequestInfo) { r.add(fmt.Sprint("WroteRequest ", i.Err)) },
		GotFirstResponseByte: func() { r.add("GotFirstResponseByte") },
	}
}

func (r *traceRecorder) sorted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.got))
}

func TestTraceHooksFireAsInNetHTTP(t *testing.T) {
	ts, _ := startH2(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // so that the request body is always written in full
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		fmt.Fprint(w, "ok")
	}))
	c := newConn(t, dialH2(t, ts, ts.Listener.Addr().String()), Options{}, nil)
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)

	send := func(rt func(*http.Request) (*http.Response, error)) []string {
		rec := &traceRecorder{}
		ctx := httptrace.WithClientTrace(context.Background(), rec.trace())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL, strings.NewReader("body"))
		req.Header.Set("X-Test", "1")
		resp, err := rt(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("ProtoMajor %d", resp.ProtoMajor)
		}
		return rec.sorted()
	}
	want := send(tr.RoundTrip)
	got := send(func(req *http.Request) (*http.Response, error) { return c.RoundTrip(req, nil) })
	if !slices.Equal(got, want) {
		t.Errorf("hooks fired:\n conn/h2  %q\n net/http %q", got, want)
	}
	if !slices.Contains(got, "Got1xxResponse 103") || !slices.Contains(got, "GotFirstResponseByte") {
		t.Errorf("hooks fired: %q", got)
	}
}

// RoundTripBody puts the response body in the caller's Body, which ends the
// stream (the accounting and done) as RoundTrip's does: at EOF, once.
func TestRoundTripBodyUsesTheCallersBody(t *testing.T) {
	ts, _ := startH2(t, nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "Hello, World!")
	}))
	c := newConn(t, dialH2(t, ts, ts.Listener.Addr().String()), Options{}, newRecorder())
	var b Body
	ended := make(chan error, 2)
	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	resp, err := c.RoundTripBody(req, EndFunc(func(err error) { ended <- err }), &b)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Body != &b {
		t.Fatalf("resp.Body is %T %p, want the caller's Body %p", resp.Body, resp.Body, &b)
	}
	if st := c.Streams(); st.Active != 1 {
		t.Fatalf("Active = %d while the body is unread, want 1", st.Active)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != "Hello, World!" {
		t.Fatalf("body %q, %v", got, err)
	}
	if err := <-ended; err != nil {
		t.Fatalf("done told %v at EOF, want nil", err)
	}
	resp.Body.Close()
	if st := c.Streams(); st.Active != 0 {
		t.Fatalf("Active = %d after EOF and Close, want 0", st.Active)
	}
	select {
	case err := <-ended:
		t.Fatalf("done told twice (second: %v)", err)
	default:
	}
}
