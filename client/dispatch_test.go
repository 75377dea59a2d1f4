package client

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

func TestSendNotifiesEachOf500RequestsAcross5RoutesExactlyOnce(t *testing.T) {
	var srvs []*dispatchServer
	for r := 0; r < 5; r++ {
		srvs = append(srvs, newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "hello "+r.URL.Query().Get("i"))
		}))
	}
	c := newTestClient(t, Config{MaxConnsPerRoute: 4, MaxConnsTotal: 20})
	f := newFinals(500)
	var handles []*Handle
	for i := 0; i < 500; i++ {
		url := fmt.Sprintf("%s/x?i=%d", srvs[i%5].URL, i)
		handles = append(handles, c.Send(newGet(t, url), f.handler()))
	}
	f.wg.Wait()
	for _, h := range handles {
		if _, err := h.Await(awaitCtx(t)); err != nil {
			t.Fatalf("Await: %v", err)
		}
		if h.Linked() {
			t.Fatalf("handle %s still linked after its body was read and closed", h.Request().URL)
		}
	}
	st := c.Stats()
	if st.Leased != 0 || st.Pending != 0 || len(st.Routes) != 5 {
		t.Fatalf("after all responses: leased %d pending %d routes %d, want 0 0 5", st.Leased, st.Pending, len(st.Routes))
	}
	for r, s := range srvs {
		if n := s.count("/x"); n != 100 {
			t.Errorf("route %d served %d requests, want 100", r, n)
		}
	}
	c.Close() // waits for the handler workers: no late notification can follow
	if n := f.all.Load(); n != 500 {
		t.Fatalf("%d final notifications, want 500", n)
	}
	for i := 0; i < 500; i++ {
		if n := f.byIndex[strconv.Itoa(i)]; n != 1 {
			t.Fatalf("request %d got %d final notifications, want 1", i, n)
		}
	}
}

func TestPanickingHandlerCostsOnlyItsOwnHandle(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	logs := &syncBuffer{}
	c := newTestClient(t, Config{MaxConnsPerRoute: 4, HandlerWorkers: 2, Logger: slog.New(slog.NewTextHandler(logs, nil))})

	var notified atomic.Int64
	var wg sync.WaitGroup
	handler := HandlerFuncs{Response: func(h *Handle, resp *http.Response) {
		defer wg.Done()
		i, _ := strconv.Atoi(h.Request().URL.Query().Get("i"))
		if i%10 == 0 {
			panic(fmt.Sprintf("handler bug on response %d", i))
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		notified.Add(1)
	}}
	var handles []*Handle
	wg.Add(100)
	for i := 0; i < 100; i++ {
		handles = append(handles, c.Send(newGet(t, fmt.Sprintf("%s/?i=%d", srv.URL, i)), handler))
	}
	wg.Wait()
	if n := notified.Load(); n != 90 {
		t.Fatalf("%d handlers completed, want 90", n)
	}
	for i, h := range handles {
		waitUntil(t, "the panicking handle is unlinked", func() bool { return !h.Linked() })
		_, err := h.Await(awaitCtx(t))
		if i%10 == 0 {
			if !errors.Is(err, ErrHandlerPanicked) {
				t.Fatalf("handle %d: Await %v, want ErrHandlerPanicked", i, err)
			}
		} else if err != nil {
			t.Fatalf("handle %d: %v", i, err)
		}
	}
	if n := logs.count("notification handler panicked"); n != 10 {
		t.Fatalf("%d panics logged, want 10", n)
	}
	st := c.Stats()
	if st.Leased != 0 || st.Pending != 0 {
		t.Fatalf("after the panics: leased %d pending %d, want 0 0", st.Leased, st.Pending)
	}
	// The workers are healthy: a new round is notified in full.
	f := newFinals(50)
	for i := 0; i < 50; i++ {
		c.Send(newGet(t, fmt.Sprintf("%s/?i=%d", srv.URL, i)), f.handler())
	}
	f.wg.Wait()
}

func TestBlockedHandlerDelaysNeitherAwaitNorOtherNotifications(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d workers", workers), func(t *testing.T) {
			srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
			c := newTestClient(t, Config{HandlerWorkers: workers})
			sleeping, wake := make(chan struct{}), make(chan struct{})
			var wakeOnce sync.Once
			t.Cleanup(func() { wakeOnce.Do(func() { close(wake) }) }) // before Close, which waits for handlers
			var sleeperReturned atomic.Bool
			sleeper := c.Send(newGet(t, srv.URL+"/sleeper"), HandlerFuncs{Response: func(_ *Handle, resp *http.Response) {
				resp.Body.Close()
				close(sleeping)
				<-wake // sleeps as long as the test needs: longer than any fixed second
				sleeperReturned.Store(true)
			}})
			<-sleeping

			var notified sync.WaitGroup
			var hs []*Handle
			for i := 0; i < 50; i++ {
				notified.Add(1)
				hs = append(hs, c.Send(newGet(t, srv.URL+"/other"), HandlerFuncs{Response: func(_ *Handle, resp *http.Response) {
					resp.Body.Close()
					notified.Done()
				}}))
			}
			var awaited sync.WaitGroup
			for _, h := range hs {
				awaited.Add(1)
				go func() { // owned by awaited
					defer awaited.Done()
					if _, err := h.Await(awaitCtx(t)); err != nil {
						t.Error(err)
					}
					if workers == 1 {
						// The only worker sleeps: the application processes
						// responses as they arrive, as it must, or the 8
						// connections run dry.
						h.Close()
					}
				}()
			}
			awaited.Wait()
			if sleeperReturned.Load() {
				t.Fatal("the sleeping handler returned before the other Awaits")
			}
			if workers > 1 {
				notified.Wait() // the other worker delivers every other notification
				if sleeperReturned.Load() {
					t.Fatal("the sleeping handler returned before the other notifications")
				}
			}
			wakeOnce.Do(func() { close(wake) })
			sleeper.Close()
		})
	}
}

func TestUnclosedResponseShowsAsTheOldestLeaseInStats(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "never read") })
	c := newTestClient(t, Config{})
	h := c.Send(newGet(t, srv.URL), nil)
	if _, err := h.Await(awaitCtx(t)); err != nil {
		t.Fatal(err)
	}
	first := c.Stats()
	if first.Leased != 1 || first.OldestLease <= 0 || first.Routes[0].OldestLease != first.OldestLease {
		t.Fatalf("stats with an unclosed response: leased %d, oldest lease %v (route %v)",
			first.Leased, first.OldestLease, first.Routes[0].OldestLease)
	}
	if !h.Linked() {
		t.Fatal("a handle whose body is open must be linked")
	}
	if second := c.Stats(); second.OldestLease < first.OldestLease {
		t.Fatalf("the oldest lease got younger: %v then %v", first.OldestLease, second.OldestLease)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Leased != 0 || st.OldestLease != 0 || st.Idle != 1 {
		t.Fatalf("after Close: leased %d oldest %v idle %d, want 0 0 1 (a small rest is drained, the connection kept)",
			st.Leased, st.OldestLease, st.Idle)
	}
}

func TestSendNeverBlocksWhenEveryConnectionIsBusy(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	c := newTestClient(t, Config{MaxConnsPerRoute: 1, MaxConnsTotal: 1, MaxConcurrentRequests: 10, HandlerWorkers: 1})
	for i := 0; i < 300; i++ { // beyond every limit: admission, connections, workers
		c.Send(newGet(t, srv.URL), nil)
	}
	waitUntil(t, "the pool is saturated", func() bool {
		st := c.Stats()
		return st.Leased == 1 && st.InFlight == 10 && st.PendingAdmission == 290
	})
	c.AbortAll()
	if st := c.Stats(); st.InFlight != 0 || st.PendingAdmission != 0 || st.Pending != 0 {
		t.Fatalf("after AbortAll: %+v", st)
	}
}

func TestInvalidRequestIsAFatalProblem(t *testing.T) {
	c := newTestClient(t, Config{})
	problems := make(chan error, 2)
	handler := HandlerFuncs{Problem: func(_ *Handle, err error, fatal bool) bool {
		if fatal {
			problems <- err
		}
		return false
	}}
	bad := newGet(t, "http://127.0.0.1:1/")
	bad.Header.Set("X-Bad", "a\r\nb")
	for _, req := range []*http.Request{nil, bad} {
		h := c.Send(req, handler)
		if err := <-problems; !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("problem %v, want ErrInvalidRequest", err)
		}
		if _, err := h.Await(awaitCtx(t)); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("Await %v, want ErrInvalidRequest", err)
		}
		if h.Linked() {
			t.Fatal("a failed handle must be unlinked")
		}
	}
}

func TestUnreachableRouteIsAFatalProblemForEachHandle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/"
	ln.Close() // dials are refused from now on
	c := newTestClient(t, Config{MaxConnsPerRoute: 2})
	f := newFinals(10)
	var hs []*Handle
	for i := 0; i < 10; i++ {
		hs = append(hs, c.Send(newGet(t, fmt.Sprintf("%s?i=%d", url, i)), f.handler()))
	}
	f.wg.Wait()
	for _, h := range hs {
		if _, err := h.Await(awaitCtx(t)); err == nil || errors.Is(err, ErrAborted) {
			t.Fatalf("Await: %v, want the dial error", err)
		}
	}
	// A dial started for callers the route has since failed (its fail-fast
	// breaker opened) may still be under way: it ends, refused, by itself.
	waitUntil(t, "nothing open, pending or in flight", func() bool {
		st := c.Stats()
		return st.Open == 0 && st.Pending == 0 && st.InFlight == 0
	})
	c.Close()
	if n := f.all.Load(); n != 10 {
		t.Fatalf("%d final notifications, want 10", n)
	}
}
