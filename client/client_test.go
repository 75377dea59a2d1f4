package client

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestCloseClosesEverySocketAndLaterCallsFailWithErrClosed(t *testing.T) {
	hs := &holdServer{release: make(chan struct{})}
	defer close(hs.release)
	tr := newTracker(8, nil)
	srv := newServer(t, tr, hs)
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	get(t, c, srv.URL)
	get(t, c, srv.URL)
	held, err := c.RoundTrip(requestCtx(context.Background(), srv.URL+"?hold=1"))
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() { // a second request in flight when Close comes
		resp, err := c.RoundTrip(requestCtx(context.Background(), srv.URL+"?hold=1"))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
		}
		waiting <- err
	}()
	waitFor(t, "second held request", func() bool { return c.Stats().Leased == 2 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	tr.waitOpen(t, 0)
	if _, err := io.ReadAll(held.Body); err == nil {
		t.Fatal("reading a body after Close succeeded")
	}
	held.Body.Close()
	if err := <-waiting; err == nil {
		t.Fatal("request in flight during Close succeeded")
	}
	if _, err := c.RoundTrip(requestCtx(context.Background(), srv.URL)); !errors.Is(err, ErrClosed) {
		t.Fatalf("RoundTrip after Close: %v", err)
	}
	if err := c.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.Shutdown(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Shutdown after Close: %v", err)
	}
}

func TestCloseAnswersQueuedWaitersWithErrClosed(t *testing.T) {
	hs := &holdServer{release: make(chan struct{})}
	defer close(hs.release)
	srv := newServer(t, nil, hs)
	c, _ := New(Config{MaxConnsPerRoute: 1})
	held, err := c.RoundTrip(requestCtx(context.Background(), srv.URL+"?hold=1"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Body.Close()
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() {
			_, err := c.RoundTrip(requestCtx(context.Background(), srv.URL))
			errs <- err
		}()
	}
	waitFor(t, "3 waiters", func() bool { return c.Stats().Pending == 3 })
	c.Close()
	for i := 0; i < 3; i++ {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Fatalf("waiter: %v, want ErrClosed", err)
		}
	}
}

// Close ends a dial in progress at once, however long DialTimeout is: the
// dial is cancelled when its connection actor stops (Close stops them all),
// the request waiting for it fails with ErrClosed, and the dial's goroutine
// ends (Close waits for it; the package's goleak check sees any that is left).
func TestCloseCancelsADialInProgress(t *testing.T) {
	dialing := make(chan struct{})
	cancelled := make(chan error, 1)
	c, err := New(Config{DialTimeout: time.Hour,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			close(dialing)
			<-ctx.Done() // a dial that never connects
			cancelled <- ctx.Err()
			return nil, ctx.Err()
		}})
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	go func() { // owned by the test: ends when the request fails
		_, err := c.RoundTrip(requestCtx(context.Background(), "http://dial.test/"))
		failed <- err
	}()
	<-dialing
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Close took %v with a dial in progress", took)
	}
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the dial's context ended with %v, want context.Canceled", err)
		}
	default:
		t.Fatal("Close returned before the dial in progress was cancelled")
	}
	if err := <-failed; !errors.Is(err, ErrClosed) {
		t.Fatalf("the request waiting for the dial: %v, want ErrClosed", err)
	}
}

func TestShutdownWaitsForRequestsInFlightThenClosesEverything(t *testing.T) {
	hs := &holdServer{release: make(chan struct{})}
	tr := newTracker(8, nil)
	srv := newServer(t, tr, hs)
	c, _ := New(Config{})
	get(t, c, srv.URL) // an idle connection
	held, err := c.RoundTrip(requestCtx(context.Background(), srv.URL+"?hold=1"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Shutdown(context.Background()) }()
	waitFor(t, "shutdown to start", func() bool { return c.pool.Closing() })
	if _, err := c.RoundTrip(requestCtx(context.Background(), srv.URL)); !errors.Is(err, ErrClosed) {
		t.Fatalf("new request during Shutdown: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(hs.release)
	if b, err := io.ReadAll(held.Body); err != nil || string(b) != "hello" {
		t.Fatalf("in-flight body: %q, %v", b, err)
	}
	held.Body.Close()
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	tr.waitOpen(t, 0)
}

func TestShutdownGivesUpWhenItsContextEnds(t *testing.T) {
	hs := &holdServer{release: make(chan struct{})}
	defer close(hs.release)
	srv := newServer(t, nil, hs)
	c, _ := New(Config{})
	held, err := c.RoundTrip(requestCtx(context.Background(), srv.URL+"?hold=1"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := c.RoundTrip(requestCtx(context.Background(), srv.URL)); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Shutdown: %v", err)
	}
}

func TestCloneMakesAnIndependentClientWithChangedSettings(t *testing.T) {
	srv := httptestTLS(t)
	c := newClient(t, Config{MaxConnsPerRoute: 3})
	if _, err := c.RoundTrip(newGet(t, srv.URL)); err == nil {
		t.Fatal("an untrusted certificate was accepted")
	}
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c2, err := c.Clone(func(cfg *Config) { cfg.TLSConfig = &tls.Config{RootCAs: pool} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Close() })
	if got := get(t, c2, srv.URL); got != "tls ok" {
		t.Fatalf("clone: %q", got)
	}
	if c2.cfg.MaxConnsPerRoute != 3 {
		t.Fatalf("clone lost settings: %+v", c2.cfg)
	}
	if err := c.Shutdown(awaitCtx(t)); err != nil {
		t.Fatal(err)
	}
}

// httptestTLS is a TLS test server answering "tls ok", whose certificate the
// client does not trust by default.
func httptestTLS(t *testing.T) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls ok") }))
	t.Cleanup(srv.Close)
	return srv
}
