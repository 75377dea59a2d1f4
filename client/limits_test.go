package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPerRouteAndTotalLimitsHoldUnderConcurrentHammering(t *testing.T) {
	const perRoute, total, routes, callers, each = 4, 8, 3, 48, 40
	all := newTracker(total, nil)
	var urls []string
	var trackers []*connTracker
	for i := 0; i < routes; i++ {
		tr := newTracker(perRoute, all)
		trackers = append(trackers, tr)
		urls = append(urls, newServer(t, tr, hello).URL)
	}
	c := newClient(t, Config{MaxConnsPerRoute: perRoute, MaxConnsTotal: total})

	stop := make(chan struct{})
	var sampler sync.WaitGroup
	var badSample atomic.Value
	sampler.Add(1)
	go func() { // owned by this test: samples Stats while the hammer runs
		defer sampler.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			st := c.Stats()
			// The supervisor's count is consistent; Open sums routes read one
			// after the other and may show a place closed on one route and
			// re-used on another (the servers' counts check the real total).
			if st.Connections > total {
				badSample.Store(fmt.Sprintf("Stats.Connections %d > total %d", st.Connections, total))
			}
			for _, r := range st.Routes {
				if r.Open > perRoute {
					badSample.Store(fmt.Sprintf("route %s Open %d > %d", r.Route, r.Open, perRoute))
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()

	var wg sync.WaitGroup
	var failures atomic.Int64
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(seed))
			for i := 0; i < each; i++ {
				u := urls[rnd.Intn(len(urls))]
				resp, err := c.RoundTrip(requestCtx(context.Background(), u))
				if err != nil {
					failures.Add(1)
					t.Errorf("request: %v", err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != "hello" {
					t.Errorf("body %q", b)
				}
			}
		}(int64(g))
	}
	wg.Wait()
	close(stop)
	sampler.Wait()
	if v := badSample.Load(); v != nil {
		t.Error(v)
	}
	for i, tr := range trackers {
		_, opened, maxOpen := tr.snapshot()
		if maxOpen > perRoute {
			t.Errorf("route %d: server saw %d connections open at once, limit %d", i, maxOpen, perRoute)
		}
		t.Logf("route %d: %d connections opened, at most %d at once (longest settle %v)", i, opened, maxOpen, tr.longestSettle)
	}
	if _, opened, maxOpen := all.snapshot(); maxOpen > total {
		t.Errorf("servers saw %d connections open at once, total limit %d", maxOpen, total)
	} else {
		t.Logf("all routes: %d requests over %d connections, at most %d at once", callers*each, opened, maxOpen)
	}
	assertQuiet(t, c)
	if st := c.Stats(); st.Open > total {
		t.Errorf("Stats.Open %d > %d", st.Open, total)
	}
}

func TestThousandKeepAliveRequestsOpenNoMoreConnectionsThanThePerRouteLimit(t *testing.T) {
	const limit = 4
	tr := newTracker(limit, nil)
	srv := newServer(t, tr, hello)
	c := newClient(t, Config{MaxConnsPerRoute: limit})
	var wg sync.WaitGroup
	for g := 0; g < 40; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if got := get(t, c, srv.URL); got != "hello" {
					t.Errorf("body %q", got)
				}
			}
		}()
	}
	wg.Wait()
	_, opened, maxOpen := tr.snapshot()
	if opened > limit || maxOpen > limit {
		t.Fatalf("1000 requests opened %d connections (%d at once); limit %d", opened, maxOpen, limit)
	}
	st := c.Stats()
	if len(st.Routes) != 1 || st.Routes[0].Leases != 1000 || st.Routes[0].Reuses < 1000-limit {
		t.Fatalf("stats: %+v", st.Routes)
	}
	assertQuiet(t, c)
}

// holdServer answers each request with headers at once and keeps the body open
// until release is closed, so a test can hold a connection leased.
type holdServer struct {
	release chan struct{}
	mu      sync.Mutex
	order   []string
}

func (h *holdServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.order = append(h.order, r.URL.Query().Get("n"))
	h.mu.Unlock()
	if r.URL.Query().Get("hold") != "" {
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-h.release:
		case <-r.Context().Done(): // the client closed the connection
			return
		}
		io.WriteString(w, "hello")
		return
	}
	io.WriteString(w, "hello")
}

func TestWaitersAreServedInArrivalOrder(t *testing.T) {
	hs := &holdServer{release: make(chan struct{})}
	srv := newServer(t, nil, hs)
	c := newClient(t, Config{MaxConnsPerRoute: 1})
	held, err := c.RoundTrip(requestCtx(context.Background(), srv.URL+"?hold=1&n=held"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	results := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			resp, err := c.RoundTrip(requestCtx(context.Background(), fmt.Sprintf("%s?n=%d", srv.URL, i)))
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			results <- err
		}(i)
		waitFor(t, fmt.Sprintf("waiter %d queued", i), func() bool { return c.Stats().Pending == i+1 })
	}
	close(hs.release)
	io.ReadAll(held.Body)
	held.Body.Close()
	for i := 0; i < n; i++ {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	hs.mu.Lock()
	got := strings.Join(hs.order, ",")
	hs.mu.Unlock()
	if want := "held,0,1,2,3,4,5,6,7,8,9"; got != want {
		t.Fatalf("served in order %s, want %s", got, want)
	}
	assertQuiet(t, c)
}

func TestLeaseTimeoutReturnsErrLeaseTimeoutAndLeavesNoWaiter(t *testing.T) {
	hs := &holdServer{release: make(chan struct{})}
	srv := newServer(t, nil, hs)
	c := newClient(t, Config{MaxConnsPerRoute: 1, LeaseTimeout: 50 * time.Millisecond})
	held, err := c.RoundTrip(requestCtx(context.Background(), srv.URL+"?hold=1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.RoundTrip(requestCtx(context.Background(), srv.URL))
	if !errors.Is(err, ErrLeaseTimeout) {
		t.Fatalf("err = %v, want ErrLeaseTimeout", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("lease timeout is not a net.Error timeout: %#v", err)
	}
	if st := c.Stats(); st.Pending != 0 || st.Leased != 1 {
		t.Fatalf("after timeout: pending %d leased %d, want 0 and 1", st.Pending, st.Leased)
	}
	close(hs.release)
	io.ReadAll(held.Body)
	held.Body.Close()
	if got := get(t, c, srv.URL); got != "hello" {
		t.Fatalf("pool unusable after a lease timeout: %q", got)
	}
	assertQuiet(t, c)
}

func TestCancelledCallerLeavesTheQueueAtOnceWithItsContextError(t *testing.T) {
	hs := &holdServer{release: make(chan struct{})}
	srv := newServer(t, nil, hs)
	c := newClient(t, Config{MaxConnsPerRoute: 1})
	held, err := c.RoundTrip(requestCtx(context.Background(), srv.URL+"?hold=1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.RoundTrip(requestCtx(ctx, srv.URL))
		done <- err
	}()
	waitFor(t, "waiter queued", func() bool { return c.Stats().Pending == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if st := c.Stats(); st.Pending != 0 {
		t.Fatalf("pending %d after cancel", st.Pending)
	}
	close(hs.release)
	io.ReadAll(held.Body)
	held.Body.Close()
	assertQuiet(t, c)
}

func TestConnectionDialedForADepartedWaiterServesTheNextWaiter(t *testing.T) {
	tr := newTracker(1, nil)
	srv := newServer(t, tr, hello)
	dialGate := make(chan struct{})
	var dials atomic.Int32
	c := newClient(t, Config{MaxConnsPerRoute: 1, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		select {
		case <-dialGate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := c.RoundTrip(requestCtx(ctx, srv.URL))
		first <- err
	}()
	waitFor(t, "dial started", func() bool { return dials.Load() == 1 })
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first waiter: %v", err)
	}
	second := make(chan string, 1)
	go func() { second <- get(t, c, srv.URL) }()
	waitFor(t, "second waiter queued", func() bool { return c.Stats().Pending == 1 })
	close(dialGate)
	if got := <-second; got != "hello" {
		t.Fatalf("second waiter got %q", got)
	}
	if d := dials.Load(); d != 1 {
		t.Fatalf("%d dials, want 1: the first waiter's dial should have served the second", d)
	}
	if _, opened, _ := tr.snapshot(); opened != 1 {
		t.Fatalf("server saw %d connections, want 1", opened)
	}
	assertQuiet(t, c)
}

func TestLRUEvictionClosesTheLeastRecentlyUsedIdleConnectionOfAnotherRoute(t *testing.T) {
	trA, trB, trC := newTracker(1, nil), newTracker(1, nil), newTracker(1, nil)
	a, b, cc := newServer(t, trA, hello), newServer(t, trB, hello), newServer(t, trC, hello)
	c := newClient(t, Config{MaxConnsPerRoute: 2, MaxConnsTotal: 2})
	get(t, c, a.URL)
	waitIdle(t, c, 1) // releases are messages: wait until the route has the connection back
	get(t, c, b.URL)
	get(t, c, b.URL) // b is now more recently used than a
	waitIdle(t, c, 2)
	trA.waitOpen(t, 1)
	trB.waitOpen(t, 1)
	get(t, c, cc.URL) // needs room: a's idle connection is the LRU one
	trA.waitOpen(t, 0)
	if o, _, _ := trB.snapshot(); o != 1 {
		t.Fatalf("route b lost its connection (open %d); the LRU one was a's", o)
	}
	trC.waitOpen(t, 1)
	st := c.Stats()
	if st.Evictions != 1 || st.Open != 2 {
		t.Fatalf("evictions %d open %d, want 1 and 2", st.Evictions, st.Open)
	}
	for _, r := range st.Routes {
		if r.Route == strings.TrimPrefix(a.URL, "") && r.ClosedBy["lru_eviction"] != 1 {
			t.Fatalf("route a: closed by %v", r.ClosedBy)
		}
	}
	assertQuiet(t, c)
}

func TestARouteWaitingForRoomIsServedWhenAnotherRouteReleases(t *testing.T) {
	hs := &holdServer{release: make(chan struct{})}
	a := newServer(t, nil, hs)
	trB := newTracker(1, nil)
	b := newServer(t, trB, hello)
	c := newClient(t, Config{MaxConnsPerRoute: 1, MaxConnsTotal: 1})
	held, err := c.RoundTrip(requestCtx(context.Background(), a.URL+"?hold=1"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() { got <- get(t, c, b.URL) }()
	waitFor(t, "route b waiting for room", func() bool { return c.Stats().PendingPermits == 1 })
	close(hs.release)
	io.ReadAll(held.Body)
	held.Body.Close()
	if s := <-got; s != "hello" {
		t.Fatalf("route b got %q", s)
	}
	if st := c.Stats(); st.Open > 1 {
		t.Fatalf("open %d > total limit 1", st.Open)
	}
	assertQuiet(t, c)
}

// An idle connection is closed after MaxIdleTime; its route, unused as long,
// reclaims itself on the same tick, and the next request gets a new one.
func TestIdleExpiryClosesConnections(t *testing.T) {
	tr := newTracker(2, nil)
	srv := newServer(t, tr, hello)
	c := newClient(t, Config{MaxIdleTime: 100 * time.Millisecond})
	get(t, c, srv.URL)
	tr.waitOpen(t, 1)
	tr.waitOpen(t, 0)
	waitFor(t, "the route reclaimed", func() bool { return c.Stats().RoutesReclaimed == 1 })
	if st := c.Stats(); st.Open != 0 || st.Expired != 1 || len(st.Routes) != 0 {
		t.Fatalf("after idle expiry: %+v", st)
	}
	if got := get(t, c, srv.URL); got != "hello" {
		t.Fatalf("after expiry: %q", got)
	}
}

func TestMaxConcurrentRequestsQueuesCallersInOrder(t *testing.T) {
	hs := &holdServer{release: make(chan struct{})}
	srv := newServer(t, nil, hs)
	c := newClient(t, Config{MaxConcurrentRequests: 2})
	var held []*http.Response
	for i := 0; i < 2; i++ {
		resp, err := c.RoundTrip(requestCtx(context.Background(), srv.URL+"?hold=1"))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, resp)
	}
	done := make(chan string, 1)
	go func() { done <- get(t, c, srv.URL) }()
	waitFor(t, "third request waiting for admission", func() bool { return c.Stats().PendingAdmission == 1 })
	select {
	case <-done:
		t.Fatal("third request ran past MaxConcurrentRequests")
	default:
	}
	close(hs.release)
	for _, r := range held {
		io.ReadAll(r.Body)
		r.Body.Close()
	}
	if got := <-done; got != "hello" {
		t.Fatalf("third request: %q", got)
	}
	assertQuiet(t, c)
}
