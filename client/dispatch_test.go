package client

import (
	"errors"
	"fmt"
	"io"
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
	c := newClient(t, Config{MaxConnsPerRoute: 4, MaxConnsTotal: 20})
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

func TestSendNeverBlocksWhenEveryConnectionIsBusy(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	c := newClient(t, Config{MaxConnsPerRoute: 1, MaxConnsTotal: 1, MaxConcurrentRequests: 10, HandlerWorkers: 1})
	for i := 0; i < 300; i++ { // beyond every limit: admission, connections, workers
		c.Send(newGet(t, srv.URL), nil)
	}
	waitFor(t, "the pool is saturated", func() bool {
		st := c.Stats()
		return st.Leased == 1 && st.InFlight == 10 && st.PendingAdmission == 290
	})
	c.AbortAll()
	if st := c.Stats(); st.InFlight != 0 || st.PendingAdmission != 0 || st.Pending != 0 {
		t.Fatalf("after AbortAll: %+v", st)
	}
}

func TestInvalidRequestIsAFatalProblem(t *testing.T) {
	c := newClient(t, Config{})
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
	c := newClient(t, Config{MaxConnsPerRoute: 2})
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
	waitFor(t, "nothing open, pending or in flight", func() bool {
		st := c.Stats()
		return st.Open == 0 && st.Pending == 0 && st.InFlight == 0
	})
	c.Close()
	if n := f.all.Load(); n != 10 {
		t.Fatalf("%d final notifications, want 10", n)
	}
}

func TestSendAllAbortsTheRestOnTheFirstError(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "slow")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes: only an abort ends this request
	})
	c := newClient(t, Config{MaxConnsPerRoute: 8})
	var reqs []*http.Request
	for i := 0; i < 30; i++ {
		path := "/slow"
		if i == 3 {
			path = "/fail"
		}
		reqs = append(reqs, newGet(t, srv.URL+path))
	}
	errFailed := errors.New("status 500")
	var reading atomic.Int64
	_, err := SendAll(awaitCtx(t), c, reqs, 5, func(resp *http.Response) (string, error) {
		if resp.StatusCode != 200 {
			return "", errFailed
		}
		reading.Add(1)
		b, err := io.ReadAll(resp.Body) // blocks until the fan-out aborts this request
		return string(b), err
	})
	if !errors.Is(err, errFailed) {
		t.Fatalf("SendAll: %v, want the first error", err)
	}
	if n := srv.count("/slow"); n > 4 {
		t.Fatalf("the server saw %d slow requests; at most the 4 sent beside the failing one", n)
	}
	if st := c.Stats(); st.Leased != 0 || st.Pending != 0 || st.InFlight != 0 {
		t.Fatalf("after SendAll failed: leased %d pending %d in flight %d, want 0", st.Leased, st.Pending, st.InFlight)
	}
}

// 200 Sends at once to a cold route on a server that takes 50 streams per
// connection: the route opens a few connections (it learns the limit from
// the server's SETTINGS, and a stream the connection has no room for is sent
// on another), all 200 are on the wire together, and each Handle is notified
// exactly once.
func TestTwoHundredSendsOverHTTP2AreEachNotifiedOnce(t *testing.T) {
	const n, perConn = 200, 50
	g := newGate()
	srv := newH2Server(t, perConn, g.handler)
	c := srv.client(t, Config{})
	f := newFinals(n)
	hs := make([]*Handle, n)
	for i := range hs {
		hs[i] = c.Send(newGet(t, fmt.Sprintf("%s/s?i=%d", srv.URL, i)), f.handler())
	}
	waitFor(t, "all 200 streams at the server", func() bool { return g.arrived.Load() == n })
	st := c.Stats()
	if st.Streams != n || st.Open != n/perConn || srv.maxRuns.Load() != n {
		t.Errorf("200 streams in flight: %d streams on %d connections, server ran %d at once; want 200 on 4",
			st.Streams, st.Open, srv.maxRuns.Load())
	}
	close(g.open)
	f.wg.Wait()
	for i, h := range hs {
		if got := f.byIndex[fmt.Sprint(i)]; got != 1 {
			t.Errorf("request %d notified %d times", i, got)
		}
		resp, err := h.Await(awaitCtx(t))
		if err != nil || resp.ProtoMajor != 2 {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if all, nonFatal := f.all.Load(), f.nonFatal.Load(); all != n || nonFatal != 0 {
		t.Errorf("%d final and %d non-fatal notifications, want %d and 0", all, nonFatal, n)
	}
	st = waitSettled(t, c)
	t.Logf("200 Sends: %d connections at the server, %d open, %d replays", srv.conns.Load(), st.Open, st.Retries)
	if got := srv.conns.Load(); got != n/perConn {
		t.Errorf("the server saw %d connections, want %d", got, n/perConn)
	}
}

// finals counts the final notifications of a set of Handles, by request
// index (the "i" query parameter), and every notification at all.
type finals struct {
	mu       sync.Mutex
	byIndex  map[string]int
	all      atomic.Int64
	nonFatal atomic.Int64
	wg       sync.WaitGroup
}

func newFinals(n int) *finals {
	f := &finals{byIndex: map[string]int{}}
	f.wg.Add(n)
	return f
}

func (f *finals) final(h *Handle) {
	f.all.Add(1)
	f.mu.Lock()
	f.byIndex[h.Request().URL.Query().Get("i")]++
	f.mu.Unlock()
	f.wg.Done()
}

func (f *finals) handler() Handler {
	return HandlerFuncs{
		Response: func(h *Handle, resp *http.Response) {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			f.final(h)
		},
		Problem: func(h *Handle, err error, fatal bool) bool {
			if fatal {
				f.final(h)
			} else {
				f.nonFatal.Add(1)
			}
			return false
		},
	}
}
