package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/connactor/connactor/internal/testkit/loopbacks"
	"github.com/connactor/connactor/telemetry"
)

// hedgeServer answers its first request only once that request's context
// ends (the client cancelled it: its server saw the request end), and its
// later ones at once with a head, then, once the first has ended, a body of
// bodyLen bytes: so the body the caller reads was written after the loser
// was cancelled.
//
// Its first request is the first attempt's: over HTTP/1.1, the one on the
// connection the first attempt leased (newRequest records it); over
// HTTP/2, where both attempts share a connection, the first to arrive (the
// hedge is written a delay after the first attempt's write has ended).
type hedgeServer struct {
	seen        atomic.Int64
	firstEnded  chan struct{}
	bodyLen     int
	firstAnswer bool // the first request wins instead: it answers once the second has arrived
	second      chan struct{}
	secondEnded chan struct{}
	once        sync.Once
	firstConn   atomic.Pointer[string] // the first attempt's connection, as its server sees its peer
}

func newHedgeServer(bodyLen int) *hedgeServer {
	return &hedgeServer{firstEnded: make(chan struct{}), second: make(chan struct{}), secondEnded: make(chan struct{}),
		bodyLen: bodyLen}
}

// newRequest returns a GET of url that records the connection its first
// attempt leased (the first GotConn: the hedge's lease comes later), so
// that the server tells the attempts apart by their connections, whatever
// the order their requests reach its handlers in.
func (s *hedgeServer) newRequest(t *testing.T, url string) *http.Request {
	req := newGet(t, url)
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		addr := info.Conn.LocalAddr().String()
		s.firstConn.CompareAndSwap(nil, &addr)
	}}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
}

// first reports whether r, the server's nth request, is the first attempt's.
func (s *hedgeServer) first(r *http.Request, n int64) bool {
	if r.ProtoMajor == 1 {
		if addr := s.firstConn.Load(); addr != nil {
			return r.RemoteAddr == *addr
		}
	}
	return n == 1
}

func (s *hedgeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	first := s.first(r, s.seen.Add(1))
	switch {
	case first && !s.firstAnswer:
		<-r.Context().Done()
		close(s.firstEnded)
	case first:
		<-s.second
		io.WriteString(w, "first")
	case s.firstAnswer:
		s.once.Do(func() { close(s.second) })
		<-r.Context().Done()
		close(s.secondEnded)
	default:
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // the head wins the race
		<-s.firstEnded
		chunk := strings.Repeat("h", 4096)
		for left := s.bodyLen; left > 0; left -= len(chunk) {
			io.WriteString(w, chunk[:min(left, len(chunk))])
			w.(http.Flusher).Flush()
		}
	}
}

// routeStats returns the stats of c's only route.
func routeStats(t *testing.T, c *Client) RouteStats {
	t.Helper()
	st := c.Stats()
	if len(st.Routes) != 1 {
		t.Fatalf("routes: %d, want 1", len(st.Routes))
	}
	return st.Routes[0]
}

// fixedHedge hedges after a millisecond: a server that holds a request
// until it is cancelled is hedged, whatever the machine's speed.
var fixedHedge = &HedgePolicy{Delay: time.Millisecond}

func checkHedgeWon(t *testing.T, c *Client, url string, s *hedgeServer) {
	t.Helper()
	resp, err := c.RoundTrip(s.newRequest(t, url))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("the winner's body failed after %d bytes: %v", len(body), err)
	}
	if len(body) != s.bodyLen {
		t.Fatalf("body: %d bytes, want %d", len(body), s.bodyLen)
	}
	select {
	case <-s.firstEnded:
	default:
		t.Fatal("the first attempt's server did not see its request end")
	}
	if got := s.seen.Load(); got != 2 {
		t.Fatalf("server saw %d requests, want 2", got)
	}
	rs := routeStats(t, c)
	if rs.Hedges != 1 || rs.HedgeWins != 1 {
		t.Fatalf("Hedges %d, HedgeWins %d; want 1 and 1", rs.Hedges, rs.HedgeWins)
	}
}

func TestAHedgeWinsOverHTTP1AndTheLosersConnectionCloses(t *testing.T) {
	s := newHedgeServer(256 << 10)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c := newClient(t, Config{Hedge: fixedHedge})
	checkHedgeWon(t, c, srv.URL, s)
	st := waitSettled(t, c)
	if rs := st.Routes[0]; rs.ClosedBy["not_reusable"]+rs.ClosedBy["error"] != 1 || rs.Open != 1 {
		t.Fatalf("the loser's connection must close and the winner's stay: open %d, closed by %v", rs.Open, rs.ClosedBy)
	}
}

func TestAHedgeWinsOverHTTP2AndTheLosersStreamIsReset(t *testing.T) {
	s := newHedgeServer(256 << 10)
	srv := newH2Server(t, 0, s.ServeHTTP)
	c := srv.client(t, Config{Hedge: fixedHedge})
	checkHedgeWon(t, c, srv.URL, s)
	if st := waitSettled(t, c); st.Routes[0].Open != 1 {
		t.Fatalf("the hedge shares the HTTP/2 connection: open %d, want 1", st.Routes[0].Open)
	}
}

func TestWhenTheFirstAttemptAnswersFirstTheHedgeIsCancelledAndNotCountedAsAWin(t *testing.T) {
	s := newHedgeServer(0)
	s.firstAnswer = true
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c := newClient(t, Config{Hedge: fixedHedge})
	resp, err := c.RoundTrip(s.newRequest(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(got) != "first" {
		t.Fatalf("body %q (%v), want the first attempt's", got, err)
	}
	<-s.secondEnded // the hedge's server saw its request end
	rs := routeStats(t, c)
	if rs.Hedges != 1 || rs.HedgeWins != 0 {
		t.Fatalf("Hedges %d, HedgeWins %d; want 1 and 0", rs.Hedges, rs.HedgeWins)
	}
}

// slowOnce answers every request after hold, or when it is cancelled; it
// counts the requests it saw.
type slowOnce struct {
	seen atomic.Int64
	hold time.Duration
}

func (s *slowOnce) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.seen.Add(1)
	io.Copy(io.Discard, r.Body)
	select {
	case <-time.After(s.hold):
		io.WriteString(w, "ok")
	case <-r.Context().Done():
	}
}

// checkNotHedged sends req, which its server holds for 50 times the hedge
// delay, and checks that it went once.
func checkNotHedged(t *testing.T, c *Client, s *slowOnce, req *http.Request) {
	t.Helper()
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got := s.seen.Load(); got != 1 {
		t.Fatalf("server saw %d requests, want 1", got)
	}
	if rs := routeStats(t, c); rs.Hedges != 0 {
		t.Fatalf("Hedges %d, want 0", rs.Hedges)
	}
}

// slowBody is a request body that takes hold before its bytes are read.
type slowBody struct {
	hold time.Duration
	r    io.Reader
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.hold > 0 {
		time.Sleep(b.hold) // an upload that takes its time
		b.hold = 0
	}
	return b.r.Read(p)
}

func TestTheHedgeDelayCountsFromTheEndOfTheWrite(t *testing.T) {
	s := &slowOnce{} // answers as soon as it has the body
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	pol := &HedgePolicy{Delay: 50 * time.Millisecond}
	c := newClient(t, Config{Hedge: pol})
	const body = "the upload"
	req, err := http.NewRequest(http.MethodPut, srv.URL, &slowBody{hold: 4 * pol.Delay, r: strings.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", "upload-1") // may be sent twice: hedged
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { // a hedge's copy is at hand at once
		return io.NopCloser(strings.NewReader(body)), nil
	}
	// The first attempt's write takes four delays, its answer next to
	// nothing: a hedge counted from the attempt's start would go, and be
	// written, while the first attempt still writes.
	checkNotHedged(t, c, s, req)
}

func TestRequestsThatMayNotBeSentTwiceAreNeverHedged(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  func(url string) *http.Request
	}{
		{"a POST", func(url string) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("body"))
			return r
		}},
		{"a GET whose body cannot be had again", func(url string) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, url, strings.NewReader("body"))
			r.GetBody = nil
			return r
		}},
		{"a GET made WithoutHedge", func(url string) *http.Request {
			r, _ := http.NewRequestWithContext(WithoutHedge(context.Background()), http.MethodGet, url, nil)
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &slowOnce{hold: 50 * fixedHedge.Delay}
			srv := httptest.NewServer(s)
			t.Cleanup(srv.Close)
			c := newClient(t, Config{Hedge: fixedHedge})
			checkNotHedged(t, c, s, tc.req(srv.URL))
		})
	}
}

func TestAPOSTWithAnIdempotencyKeyAndGetBodyIsHedged(t *testing.T) {
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := seen.Add(1)
		body, _ := io.ReadAll(r.Body)
		if n == 1 {
			<-r.Context().Done()
			return
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, Config{Hedge: fixedHedge})
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("again"))
	req.Header.Set("Idempotency-Key", "k1")
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "again" {
		t.Fatalf("the hedge sent body %q, want the request's", body)
	}
	if rs := routeStats(t, c); rs.Hedges != 1 || rs.HedgeWins != 1 {
		t.Fatalf("Hedges %d, HedgeWins %d; want 1 and 1", rs.Hedges, rs.HedgeWins)
	}
}

func TestNoHedgeGoesWhenTheRouteHasNoRoom(t *testing.T) {
	s := &slowOnce{hold: 50 * fixedHedge.Delay}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c := newClient(t, Config{Hedge: fixedHedge, MaxConnsPerRoute: 1})
	checkNotHedged(t, c, s, newGet(t, srv.URL))
}

func TestNoHedgeGoesBeforeTheRouteHasMeasuredItsLatency(t *testing.T) {
	s := &slowOnce{hold: 20 * time.Millisecond}
	fast := &slowOnce{}
	h := newHedgeServer(1)
	var phase atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		[]http.Handler{s, fast, h}[phase.Load()].ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, Config{Hedge: &HedgePolicy{}}) // the measured p95
	checkNotHedged(t, c, s, newGet(t, srv.URL))

	// Once measured (fast answers), a request held until cancelled is
	// hedged. (A fast answer slower than the p95 may be hedged too.)
	phase.Store(1)
	for range 64 {
		get(t, c, srv.URL)
	}
	before := routeStats(t, c)
	phase.Store(2)
	resp, err := c.RoundTrip(h.newRequest(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if rs := routeStats(t, c); rs.Hedges != before.Hedges+1 || rs.HedgeWins != before.HedgeWins+1 {
		t.Fatalf("Hedges %d, HedgeWins %d; want one more of each than %d and %d", rs.Hedges, rs.HedgeWins,
			before.Hedges, before.HedgeWins)
	}
}

func TestTheBudgetCapsHedgesWhenEveryRequestIsSlow(t *testing.T) {
	s := &slowOnce{hold: 20 * time.Millisecond}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c := newClient(t, Config{Hedge: fixedHedge, MaxConnsPerRoute: 32})
	const requests, callers = 100, 8
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range requests / callers {
				resp, err := c.RoundTrip(newGet(t, srv.URL))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	rs := routeStats(t, c)
	sent := int64(requests / callers * callers)
	// 0.1 x the route's requests in the window, plus 10.
	if limit := uint64(sent/10 + 10); rs.Hedges > limit || rs.Hedges < 10 {
		t.Fatalf("Hedges %d, want 10 to %d", rs.Hedges, limit)
	}
	if got := s.seen.Load(); got != sent+int64(rs.Hedges) {
		t.Fatalf("server saw %d requests, want %d sent and %d hedges", got, sent, rs.Hedges)
	}
}

func TestWhenEveryAttemptFailsTheCallerGetsOneError(t *testing.T) {
	var seen atomic.Int64
	both := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) == 2 {
			close(both)
		}
		<-both
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, Config{Hedge: fixedHedge})
	resp, err := c.RoundTrip(newGet(t, srv.URL))
	if err == nil {
		resp.Body.Close()
		t.Fatal("no error")
	}
	var ee *ExchangeError
	if !errors.As(err, &ee) {
		t.Fatalf("error %v, want the first attempt's ExchangeError", err)
	}
	st := waitSettled(t, c)
	if rs := st.Routes[0]; rs.Hedges != 1 || rs.HedgeWins != 0 {
		t.Fatalf("Hedges %d, HedgeWins %d; want 1 and 0", rs.Hedges, rs.HedgeWins)
	}
}

func TestHedgePolicyIsValidatedAndDefaulted(t *testing.T) {
	c := newClient(t, Config{Hedge: &HedgePolicy{}})
	if h := c.cfg.Hedge; h.Percentile != 0.95 || h.MaxAttempts != 2 || h.Budget != 0.1 {
		t.Fatalf("defaults: %+v", *h)
	}
	for _, p := range []HedgePolicy{{Delay: -1}, {Percentile: 1}, {MaxAttempts: 6}, {Budget: -1}} {
		if _, err := New(Config{Hedge: &p}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", p, err)
		}
	}
}

func TestEachAttemptOfAHedgedRequestIsAChildSpanAndHedgesAndWinsAreCounted(t *testing.T) {
	s := newHedgeServer(1)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	o := newObserved(t, Config{Hedge: fixedHedge})
	resp, err := o.c.RoundTrip(s.newRequest(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	var request sdktrace.ReadOnlySpan
	var attempts []sdktrace.ReadOnlySpan
	for _, sp := range o.spans.Ended() {
		if sp.Name() == "attempt" {
			attempts = append(attempts, sp)
		} else {
			request = sp
		}
	}
	if request == nil || len(attempts) != 2 {
		t.Fatalf("spans: request %v, %d attempts; want one request span and two attempts", request != nil, len(attempts))
	}
	hedged := 0
	for _, a := range attempts {
		if a.Parent().SpanID() != request.SpanContext().SpanID() {
			t.Fatal("an attempt's span is not a child of the request's")
		}
		if attrsOf(a)[telemetry.AttrHedge].AsBool() {
			hedged++
			if a.Status().Code == codes.Error {
				t.Fatalf("the hedge won, yet its span says %q", a.Status().Description)
			}
		} else if a.Status().Code != codes.Error {
			t.Fatal("the first attempt lost, yet its span has no error status")
		}
	}
	if hedged != 1 {
		t.Fatalf("%d attempts marked %s, want 1", hedged, telemetry.AttrHedge)
	}
	ms := o.collect(t)
	if h, w := sumOf(ms, telemetry.MetricHedges), sumOf(ms, telemetry.MetricHedgeWins); h != 1 || w != 1 {
		t.Fatalf("%s %d, %s %d; want 1 and 1", telemetry.MetricHedges, h, telemetry.MetricHedgeWins, w)
	}
}

func TestAHedgeGoesToAnotherAddressOfTheHostWhenOneIsUp(t *testing.T) {
	if !loopbacks.Available() {
		t.Skip("SKIPPED: this machine cannot listen on 127.0.0.2 (Linux routes all of 127.0.0.0/8 to loopback; elsewhere, add the addresses)")
	}
	const warm = 4 // connections opened first, spread over both addresses
	var seen atomic.Int64
	var mu sync.Mutex
	at := map[int64]string{} // request number -> the address that served it
	barrier := make(chan struct{})
	srv, err := loopbacks.Start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := seen.Add(1)
		mu.Lock()
		at[n] = r.Context().Value(http.LocalAddrContextKey).(net.Addr).String()
		mu.Unlock()
		switch {
		case n == warm:
			close(barrier)
		case n < warm:
			<-barrier
		case n == warm+1:
			<-r.Context().Done() // the first attempt of the hedged request
		}
	}), loopbacks.Options{}, loopbacks.Addrs(2, 3)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	res := &loopbacks.Resolver{}
	res.Set(loopbacks.Addrs(2, 3)...)
	url := fmt.Sprintf("http://svc.test:%d/", srv.Port())
	c := newClient(t, Config{Resolver: res, Hedge: fixedHedge})
	var wg sync.WaitGroup
	for range warm { // not hedged: the barrier holds them longer than the delay
		wg.Go(func() {
			resp, err := c.RoundTrip(requestCtx(WithoutHedge(context.Background()), url))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	waitIdle(t, c, warm)
	get(t, c, url)
	mu.Lock()
	first, hedge := at[warm+1], at[warm+2]
	mu.Unlock()
	if hedge == "" || first == hedge {
		t.Fatalf("the first attempt went to %s and the hedge to %q: want another address", first, hedge)
	}
}

func TestStatsSayHowLongAHedgedRequestWaitsBeforeItsHedge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)

	fixed := newClient(t, Config{Hedge: fixedHedge})
	get(t, fixed, srv.URL)
	if got := routeStats(t, fixed).HedgeDelay; got != fixedHedge.Delay {
		t.Errorf("with a fixed Delay: HedgeDelay %v, want %v", got, fixedHedge.Delay)
	}

	measured := newClient(t, Config{Hedge: &HedgePolicy{}}) // the measured p95
	for range 64 {
		get(t, measured, srv.URL)
	}
	if got := routeStats(t, measured).HedgeDelay; got <= 0 {
		t.Errorf("after 64 answers at the measured p95: HedgeDelay %v, want the measured latency", got)
	}

	none := newClient(t, Config{})
	get(t, none, srv.URL)
	if got := routeStats(t, none).HedgeDelay; got != 0 {
		t.Errorf("without Hedge: HedgeDelay %v, want 0", got)
	}
}
