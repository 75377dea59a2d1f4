package client

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
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
