package h2

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
)

// dialFake connects to a scripted server (h2c).
func dialFake(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

func TestGoAwayRefusesStreamsAboveTheLastStreamIDAndDrains(t *testing.T) {
	refusedPath := make(chan string, 1)
	addr := startFake(t, func(f *fakeConn) {
		id1, _ := f.request()
		id2, _ := f.request()
		id3, p3 := f.request()
		if id3 == 0 {
			t.Error("fake server: fewer than 3 requests")
			return
		}
		f.goAway(id2) // id3 was never processed
		refusedPath <- p3
		f.respond(id1, 200, "one")
		f.respond(id2, 200, "two")
	})
	rec := newRecorder()
	c := newConn(t, dialFake(t, addr), Options{}, rec)

	var wg sync.WaitGroup
	errs := make(map[string]error)
	var mu sync.Mutex
	for _, p := range []string{"/a", "/b", "/c"} {
		wg.Add(1)
		go func() { // owned by the test: wg
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+p, strings.NewReader("body"))
			resp, err := c.RoundTrip(req, nil)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			mu.Lock()
			errs[p] = err
			mu.Unlock()
		}()
	}
	if got := waitFor(t, rec.draining, "Draining"); got != ReasonGoAway {
		t.Errorf("Draining(%q), want goaway", got)
	}
	wg.Wait()
	refused := waitFor(t, refusedPath, "the refused stream's path")
	for p, err := range errs {
		if p == refused {
			assertNotSent(t, err, ErrRefused)
			continue
		}
		if err != nil {
			t.Errorf("%s (at or below the last stream id): %v", p, err)
		}
	}
	if s := c.Streams(); s.Available != 0 {
		t.Errorf("a draining connection has streams available: %+v", s)
	}
	got := waitFor(t, rec.closed, "Closed once the last stream ended")
	if got.reason != ReasonGoAway {
		t.Errorf("Closed(%q, %v), want goaway", got.reason, got.err)
	}
}

func TestGoAwayWithAnErrorCodeRefusesUnprocessedStreamsAndSaysWhy(t *testing.T) {
	addr := startFake(t, func(f *fakeConn) {
		if id, _ := f.request(); id != 0 {
			f.goAwayCode(0, http2.ErrCodeEnhanceYourCalm) // stream 1 was never processed
		}
	})
	rec := newRecorder()
	c := newConn(t, dialFake(t, addr), Options{}, rec)
	_, _, err := get(t, c, "http://"+addr+"/")
	assertNotSent(t, err, ErrRefused)
	if got := waitFor(t, rec.draining, "Draining"); got != ReasonGoAway {
		t.Errorf("Draining(%q), want goaway", got)
	}
	got := waitFor(t, rec.closed, "Closed")
	if got.reason != ReasonGoAway || got.err == nil || !strings.Contains(got.err.Error(), "ENHANCE_YOUR_CALM") {
		t.Errorf("Closed(%q, %v), want goaway saying ENHANCE_YOUR_CALM", got.reason, got.err)
	}
}

func TestGoAwayMidLoadFailsOnlyUnprocessedStreamsAndThoseAreRetryable(t *testing.T) {
	const blocked, late = 30, 30
	var arrived atomic.Int32
	release := make(chan struct{})
	allBlocked := make(chan struct{})
	ts, _ := startH2(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/close":
			// Go's server turns this into a graceful GOAWAY whose last stream id
			// is the highest it has seen.
			w.Header().Set("Connection", "close")
		case "/blocked":
			if arrived.Add(1) == blocked {
				close(allBlocked)
			}
			<-release
		}
		fmt.Fprint(w, "ok")
	}))
	rec := newRecorder()
	c := newConn(t, dialH2(t, ts, ts.Listener.Addr().String()), Options{}, rec)

	do := func(path string) error {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		resp, err := c.RoundTrip(req, nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return err
	}
	var wg sync.WaitGroup
	blockedErrs := make([]error, blocked)
	for i := range blocked {
		wg.Add(1)
		go func() { // owned by the test: wg
			defer wg.Done()
			blockedErrs[i] = do("/blocked")
		}()
	}
	waitFor(t, allBlocked, "the blocked requests to reach the server")

	// The GOAWAY goes out while more requests are being sent: those the server
	// saw first are processed, the others are above the last stream id.
	lateErrs := make([]error, late)
	for i := range late {
		wg.Add(1)
		go func() { // owned by the test: wg
			defer wg.Done()
			lateErrs[i] = do("/late")
		}()
	}
	if err := do("/close"); err != nil {
		t.Fatalf("/close: %v", err)
	}
	if got := waitFor(t, rec.draining, "Draining"); got != ReasonGoAway {
		t.Errorf("Draining(%q), want goaway", got)
	}
	close(release)
	wg.Wait()

	for i, err := range blockedErrs {
		if err != nil {
			t.Errorf("blocked request %d (processed before the GOAWAY) failed: %v", i, err)
		}
	}
	var ok, refused, noStream int
	for i, err := range lateErrs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrRefused):
			assertNotSent(t, err, ErrRefused)
			refused++
		case errors.Is(err, ErrNoStream):
			assertNotSent(t, err, ErrNoStream)
			noStream++
		default:
			t.Errorf("late request %d failed in a way that is not safe to retry: %v", i, err)
		}
	}
	t.Logf("late requests: %d processed, %d refused above the last stream id, %d found no stream", ok, refused, noStream)
	got := waitFor(t, rec.closed, "Closed once the last stream ended")
	if got.reason != ReasonGoAway {
		t.Errorf("Closed(%q, %v), want goaway", got.reason, got.err)
	}
}

func TestRefusedStreamIsSafeToRetryAndASecondRetiresTheConnection(t *testing.T) {
	addr := startFake(t, func(f *fakeConn) {
		id, _ := f.request()
		f.refuse(id)
		id, _ = f.request()
		f.refuse(id)
	})
	rec := newRecorder()
	c := newConn(t, dialFake(t, addr), Options{}, rec)
	waitFor(t, rec.streams, "the server's SETTINGS") // refusals count from then on
	post := func() error {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader("not idempotent"))
		resp, err := c.RoundTrip(req, nil)
		if err == nil {
			resp.Body.Close()
			return errors.New("the refused request got a response")
		}
		return err
	}

	assertNotSent(t, post(), ErrRefused)
	if s := c.Streams(); s.Draining || s.Available == 0 {
		t.Fatalf("one refusal retired the connection: %+v", s)
	}
	assertNotSent(t, post(), ErrRefused)
	if got := waitFor(t, rec.draining, "Draining after the second refusal"); got != ReasonRefused {
		t.Errorf("Draining(%q), want refused", got)
	}
	if s := c.Streams(); s.Available != 0 {
		t.Errorf("a retired connection has streams available: %+v", s)
	}
	got := waitFor(t, rec.closed, "Closed of the idle retired connection")
	if got.reason != ReasonRefused || got.err != nil {
		t.Errorf("Closed(%q, %v), want refused", got.reason, got.err)
	}
}

func TestServerCloseWithoutGoAwayIsReported(t *testing.T) {
	addr := startFake(t, func(f *fakeConn) {
		id, _ := f.request()
		f.respond(id, 200, "bye")
		f.nc.(*net.TCPConn).CloseWrite() // a FIN; a Close could turn into a reset
	})
	rec := newRecorder()
	c := newConn(t, dialFake(t, addr), Options{}, rec)
	if _, body, err := get(t, c, "http://"+addr+"/"); err != nil || body != "bye" {
		t.Fatalf("GET = %q, %v", body, err)
	}
	got := waitFor(t, rec.closed, "Closed")
	if got.reason != ReasonServerClose || !errors.Is(got.err, io.EOF) {
		t.Errorf("Closed(%q, %v), want server_close with EOF", got.reason, got.err)
	}
	if s := c.Streams(); !s.Closed || s.Available != 0 {
		t.Errorf("after Closed: %+v", s)
	}
	_, _, err := get(t, c, "http://"+addr+"/")
	assertNotSent(t, err, ErrNoStream)
}

func TestCloseFailsOpenStreamsAndReportsLocal(t *testing.T) {
	release := make(chan struct{})
	ts, _ := startH2(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release) })
	rec := newRecorder()
	c := newConn(t, dialH2(t, ts, ts.Listener.Addr().String()), Options{}, rec)
	doneErr := make(chan error, 1)
	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	resp, err := c.RoundTrip(req, EndFunc(func(err error) { doneErr <- err }))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	got := waitFor(t, rec.closed, "Closed")
	if got.reason != ReasonLocal || got.err != nil {
		t.Errorf("Closed(%q, %v), want local", got.reason, got.err)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the open body read to its end on a closed connection")
	}
	resp.Body.Close()
	if err := waitFor(t, doneErr, "Done"); err == nil {
		t.Error("Done(nil) for a stream cut by Close")
	}
}

func TestStreamsTheEngineTurnsAwayAreNotSent(t *testing.T) {
	var served atomic.Int32
	ts, _ := startH2(t, nil, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) }))
	c := newConn(t, dialH2(t, ts, ts.Listener.Addr().String()), Options{}, nil)
	// The engine stops taking streams the Conn's accounting still allows (as
	// when the peer lowers its limit): its refusal must read as not sent.
	c.cc.SetDoNotReuse()
	req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader("body"))
	_, err := c.RoundTrip(req, nil)
	assertNotSent(t, err, ErrNoStream)
	if got := served.Load(); got != 0 {
		t.Errorf("server served %d requests", got)
	}
	if s := c.Streams(); s.Active != 0 {
		t.Errorf("after the refusal: %+v", s)
	}
}
