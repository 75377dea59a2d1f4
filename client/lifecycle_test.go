package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
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

func TestWorksAsHTTPClientTransportWithRedirectsAndCookies(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "s3cret", Path: "/"})
		http.Redirect(w, r, "/home", http.StatusFound)
	})
	mux.HandleFunc("/home", func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie("session")
		if err != nil {
			http.Error(w, "no cookie", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "welcome "+ck.Value)
	})
	srv := newServer(t, nil, mux)
	c := newClient(t, Config{})
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Transport: c, Jar: jar, Timeout: 5 * time.Second}
	resp, err := hc.Get(srv.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "welcome s3cret" || resp.Request.URL.Path != "/home" {
		t.Fatalf("got %d %q at %s", resp.StatusCode, b, resp.Request.URL)
	}
	st := c.Stats()
	if st.Routes[0].Opened != 1 || st.Routes[0].Leases != 2 {
		t.Fatalf("redirect did not re-use the connection: %+v", st.Routes[0])
	}
	assertQuiet(t, c)
}

func TestOneMebibyteBodyStreamsAndTheConnectionIsReused(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	sum := sha256.Sum256(big)
	tr := newTracker(1, nil)
	srv := newServer(t, tr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			h := sha256.New()
			n, _ := io.Copy(h, r.Body)
			if n != int64(len(big)) || !bytes.Equal(h.Sum(nil), sum[:]) {
				http.Error(w, "bad upload", 400)
				return
			}
		}
		w.Write(big)
	}))
	c := newClient(t, Config{MaxConnsPerRoute: 1})
	for i := 0; i < 3; i++ {
		method, body := http.MethodGet, io.Reader(nil)
		if i == 1 {
			method, body = http.MethodPost, bytes.NewReader(big)
		}
		req, _ := http.NewRequest(method, srv.URL, body)
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		n, err := io.Copy(h, resp.Body)
		resp.Body.Close()
		if err != nil || n != int64(len(big)) || !bytes.Equal(h.Sum(nil), sum[:]) || resp.StatusCode != 200 {
			t.Fatalf("%s: status %d, %d bytes, err %v", method, resp.StatusCode, n, err)
		}
	}
	if _, opened, _ := tr.snapshot(); opened != 1 {
		t.Fatalf("%d connections for 3 requests, want 1", opened)
	}
	assertQuiet(t, c)
}

func TestErrorStatusesAreResponsesNotErrors(t *testing.T) {
	srv := newServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/404":
			http.NotFound(w, r)
		default:
			http.Error(w, "boom", http.StatusInternalServerError)
		}
	}))
	c := newClient(t, Config{})
	for path, want := range map[string]int{"/404": 404, "/500": 500} {
		resp, err := c.RoundTrip(requestCtx(context.Background(), srv.URL+path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
	}
	assertQuiet(t, c)
}

func TestBadInputGetsClearErrorsNeverPanics(t *testing.T) {
	srv := newServer(t, nil, hello)
	// A port nobody listens on: listen, note the address, close.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String()
	l.Close()
	c := newClient(t, Config{DialTimeout: 2 * time.Second})
	bad := func(name string, req *http.Request, want error) {
		t.Helper()
		resp, err := c.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: no error", name)
		}
		if want != nil && !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", name, err, want)
		}
		t.Logf("%s: %v", name, err)
	}
	mk := func(method, raw string) *http.Request {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return (&http.Request{Method: method, URL: u, Header: http.Header{}}).WithContext(context.Background())
	}
	bad("nil request", nil, ErrInvalidRequest)
	bad("nil URL", &http.Request{Method: "GET", Header: http.Header{}}, ErrInvalidRequest)
	bad("unsupported scheme", mk("GET", "ftp://example.com/x"), ErrUnsupportedScheme)
	bad("missing host", mk("GET", "http:///path"), nil)
	bad("bad method", mk("GE T", srv.URL), ErrInvalidRequest)
	inj := mk("GET", srv.URL)
	inj.Header.Set("X-Evil", "a\r\nInjected: yes")
	bad("header injection", inj, ErrInvalidRequest)
	refused := mk("GET", dead)
	bad("refused connection", refused, nil)
	var oe *net.OpError
	if _, err := c.RoundTrip(mk("GET", dead)); !errors.As(err, &oe) {
		t.Fatalf("refused connection error does not unwrap to *net.OpError: %v", err)
	}
	if got := get(t, c, srv.URL); got != "hello" {
		t.Fatalf("pool unusable after bad input: %q", got)
	}
	assertQuiet(t, c)
	for _, r := range c.Stats().Routes {
		if strings.Contains(r.Route, l.Addr().String()) && r.Open != 0 {
			t.Fatalf("failed dials left connections open: %+v", r)
		}
	}
}

func TestNewRefusesInvalidConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"negative per-route":            {MaxConnsPerRoute: -1},
		"negative total":                {MaxConnsTotal: -1},
		"negative concurrency":          {MaxConcurrentRequests: -5},
		"negative lease timeout":        {LeaseTimeout: -time.Second},
		"negative idle time":            {MaxIdleTime: -1},
		"negative lifetime":             {MaxLifetime: -1},
		"negative dial timeout":         {DialTimeout: -1},
		"negative header limit":         {MaxResponseHeaderBytes: -1},
		"per-route above total":         {MaxConnsPerRoute: 10, MaxConnsTotal: 5},
		"per-route above default total": {MaxConnsPerRoute: 100},
	} {
		c, err := New(cfg)
		if err == nil {
			c.Close()
			t.Errorf("%s: accepted", name)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v does not wrap ErrInvalidConfig", name, err)
		}
	}
	c, err := New(Config{MaxConnsTotal: 4})
	if err != nil {
		t.Fatalf("small total: %v", err)
	}
	defer c.Close()
	if c.cfg.MaxConnsPerRoute != 4 || c.cfg.MaxConcurrentRequests != DefaultMaxConcurrentRequests {
		t.Fatalf("defaults: %+v", c.cfg)
	}
}

// caller is an actor of an embedding service: it asks the client for a request
// and must keep handling its own messages while the request is in flight.
type caller struct {
	client *Client
	url    string
	pinged chan struct{}
	got    chan string
}

type ping struct{}

func (a *caller) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		req, _ := http.NewRequest(http.MethodGet, a.url, nil)
		ctx.Request(a.client.PID(), &Request{HTTP: req})
		ctx.Send(ctx.Self(), &ping{})
	case *ping:
		close(a.pinged) // handled while the request is in flight: the mailbox is free
	case *Response:
		if m.Err != nil {
			a.got <- "error: " + m.Err.Error()
			return
		}
		b, _ := io.ReadAll(m.HTTP.Body)
		m.HTTP.Body.Close()
		a.got <- string(b)
	}
}

func TestAnActorCallerReceivesTheResponseWithoutBlockingItsMailbox(t *testing.T) {
	pinged := make(chan struct{})
	srv := newServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-pinged // answer only once the caller has handled a message of its own
		io.WriteString(w, "from the pool")
	}))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(ProtoactorLogger(slog.Default())))
	defer sys.Shutdown()
	c := newClient(t, Config{System: sys})
	a := &caller{client: c, url: srv.URL, pinged: pinged, got: make(chan string, 1)}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }))
	defer func() { sys.Root.StopFuture(pid).Wait() }()
	select {
	case got := <-a.got:
		if got != "from the pool" {
			t.Fatalf("actor got %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no response reached the actor")
	}
	assertQuiet(t, c)
}
