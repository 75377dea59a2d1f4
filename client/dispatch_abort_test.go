package client

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestAbortBeforeSendingLeavesTheQueueAndTheServerNeverSeesIt(t *testing.T) {
	holding, release := make(chan struct{}), make(chan struct{})
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(holding)
			<-release
		}
		io.WriteString(w, "ok")
	})
	c := newClient(t, Config{MaxConnsPerRoute: 1})
	hA := c.Send(newGet(t, srv.URL+"/hold"), nil)
	<-holding // A holds the route's only connection

	var notifiedB atomic.Int64
	hB := c.Send(newGet(t, srv.URL+"/b"), HandlerFuncs{
		Response: func(*Handle, *http.Response) { notifiedB.Add(1) },
		Problem:  func(*Handle, error, bool) bool { notifiedB.Add(1); return false },
	})
	waitFor(t, "B waits in the route's queue", func() bool { return c.Stats().Pending == 1 })

	hB.Abort()
	if st := c.Stats(); st.Pending != 0 {
		t.Fatalf("after Abort: %d pending, want 0 (Abort returns once the request left its queue)", st.Pending)
	}
	if hB.Linked() {
		t.Fatal("aborted handle still linked")
	}
	if _, err := hB.Await(awaitCtx(t)); !errors.Is(err, ErrAborted) {
		t.Fatalf("Await after Abort: %v, want ErrAborted", err)
	}

	close(release)
	respA, err := hA.Await(awaitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, respA.Body)
	respA.Body.Close()
	hC := c.Send(newGet(t, srv.URL+"/c"), nil)
	respC, err := hC.Await(awaitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	hC.Close()
	if respC.StatusCode != 200 {
		t.Fatalf("C: status %d", respC.StatusCode)
	}

	st := c.Stats()
	if srv.count("/b") != 0 {
		t.Fatal("the server saw the aborted request")
	}
	if len(st.Routes) != 1 || st.Routes[0].Leases != 2 || st.Routes[0].Opened != 1 {
		t.Fatalf("route: %+v, want 2 leases (A, C) on 1 connection: B was never granted one", st.Routes)
	}
	c.Close()
	if n := notifiedB.Load(); n != 0 {
		t.Fatalf("aborted handle got %d notifications, want 0", n)
	}
}

// Abort while the request is on the wire, its response head awaited: the
// connection is closed (the server sees it go) and never re-used.
func TestAbortWhileTheHeadIsAwaitedClosesTheConnection(t *testing.T) {
	arrived, clientGone := make(chan struct{}), make(chan struct{})
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			close(arrived)
			<-r.Context().Done() // the server saw the client close the connection
			close(clientGone)
			return
		}
		io.WriteString(w, "ok")
	})
	c := newClient(t, Config{MaxConnsPerRoute: 1})
	var notified atomic.Int64
	h := c.Send(newGet(t, srv.URL+"/hang"), HandlerFuncs{
		Response: func(*Handle, *http.Response) { notified.Add(1) },
		Problem:  func(*Handle, error, bool) bool { notified.Add(1); return false },
	})
	<-arrived
	h.Abort()
	if _, err := h.Await(awaitCtx(t)); !errors.Is(err, ErrAborted) || h.Linked() {
		t.Fatalf("Await after Abort: %v, linked %v; want ErrAborted, unlinked", err, h.Linked())
	}
	<-clientGone
	resp, err := c.RoundTrip(newGet(t, srv.URL+"/ok"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n := srv.newConns.Load(); n != 2 {
		t.Fatalf("server accepted %d connections, want 2: the aborted one must not be re-used", n)
	}
	if r := c.Stats().Routes[0]; r.ClosedBy["not_reusable"] != 1 || r.Reuses != 0 {
		t.Fatalf("route after abort: closed by %v, reuses %d; want 1 not_reusable, 0 reuses", r.ClosedBy, r.Reuses)
	}
	c.Close() // waits for the handler workers
	if n := notified.Load(); n != 0 {
		t.Fatalf("%d notifications after Abort, want 0", n)
	}
}

func TestAbortAfterHeadersClosesTheConnectionInsteadOfReusingIt(t *testing.T) {
	release := make(chan struct{})
	clientGone := make(chan struct{})
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			w.Header().Set("Content-Length", "100000")
			io.WriteString(w, "first chunk")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done(): // the server saw the client close the connection
				close(clientGone)
			case <-release:
			}
			return
		}
		io.WriteString(w, "ok")
	})
	defer close(release)
	c := newClient(t, Config{MaxConnsPerRoute: 1})

	var notified atomic.Int64
	h := c.Send(newGet(t, srv.URL+"/stream"), HandlerFuncs{
		Response: func(*Handle, *http.Response) { notified.Add(1) },
	})
	resp, err := h.Await(awaitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("first chunk"))
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	h.Abort()
	if _, err := resp.Body.Read(buf); err == nil {
		t.Fatal("body still readable after Abort")
	}
	if h.Linked() {
		t.Fatal("aborted handle still linked")
	}
	if _, err := h.Await(awaitCtx(t)); !errors.Is(err, ErrAborted) {
		t.Fatalf("Await after Abort: %v, want ErrAborted", err)
	}
	<-clientGone

	h2 := c.Send(newGet(t, srv.URL+"/ok"), nil)
	if _, err := h2.Await(awaitCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := h2.Close(); err != nil {
		t.Fatal(err)
	}
	if n := srv.newConns.Load(); n != 2 {
		t.Fatalf("server accepted %d connections, want 2: the aborted one must not be re-used", n)
	}
	st := c.Stats()
	if r := st.Routes[0]; r.ClosedBy["not_reusable"] != 1 || r.Reuses != 0 {
		t.Fatalf("route after abort: closed by %v, reuses %d; want 1 not_reusable, 0 reuses", r.ClosedBy, r.Reuses)
	}
	if notified.Load() > 1 {
		t.Fatal("more than one notification")
	}
}

func TestAbortAllWith200InFlightLeavesNothingLeasedOrPending(t *testing.T) {
	hang := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-r.Context().Done()
			return
		}
		io.WriteString(w, "ok")
	}
	srvs := []*dispatchServer{newDispatchServer(t, hang), newDispatchServer(t, hang)}
	c := newClient(t, Config{MaxConnsPerRoute: 4, MaxConnsTotal: 8})
	var notified atomic.Int64
	handler := HandlerFuncs{
		Response: func(*Handle, *http.Response) { notified.Add(1) },
		Problem:  func(*Handle, error, bool) bool { notified.Add(1); return false },
	}
	var hs []*Handle
	for i := 0; i < 200; i++ {
		hs = append(hs, c.Send(newGet(t, srvs[i%2].URL+"/hang"), handler))
	}
	waitFor(t, "8 requests are on the wire and 192 wait", func() bool {
		st := c.Stats()
		return srvs[0].count("/hang")+srvs[1].count("/hang") == 8 && st.Leased == 8 && st.Pending == 192
	})

	c.AbortAll()
	st := c.Stats()
	if st.Leased != 0 || st.Pending != 0 {
		t.Fatalf("after AbortAll: leased %d pending %d, want 0 0", st.Leased, st.Pending)
	}
	for _, h := range hs {
		if h.Linked() {
			t.Fatal("a handle is still linked after AbortAll")
		}
		if _, err := h.Await(awaitCtx(t)); !errors.Is(err, ErrAborted) {
			t.Fatalf("Await after AbortAll: %v, want ErrAborted", err)
		}
	}
	if n := srvs[0].count("/hang") + srvs[1].count("/hang"); n != 8 {
		t.Fatalf("servers saw %d requests, want the 8 that were on the wire", n)
	}

	// The client stays usable.
	h := c.Send(newGet(t, srvs[0].URL+"/ok"), nil)
	if _, err := h.Await(awaitCtx(t)); err != nil {
		t.Fatalf("after AbortAll: %v", err)
	}
	h.Close()
	c.Close()
	if n := notified.Load(); n != 0 {
		t.Fatalf("%d notifications after AbortAll, want 0", n)
	}
}

func TestSendOnAClosedClientFailsAtOnceWithErrClosed(t *testing.T) {
	c := newClient(t, Config{})
	c.Close()
	var notified atomic.Int64
	h := c.Send(newGet(t, "http://127.0.0.1:1/"), HandlerFuncs{Problem: func(*Handle, error, bool) bool { notified.Add(1); return false }})
	if _, err := h.Await(awaitCtx(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Await: %v, want ErrClosed", err)
	}
	if h.Linked() || notified.Load() != 0 {
		t.Fatal("a refused handle must be unlinked and silent")
	}
	h.Abort() // harmless
}

func TestCloseAbortsLinkedHandlesSilently(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	c := newClient(t, Config{MaxConnsPerRoute: 2})
	var notified atomic.Int64
	handler := HandlerFuncs{
		Response: func(*Handle, *http.Response) { notified.Add(1) },
		Problem:  func(*Handle, error, bool) bool { notified.Add(1); return false },
	}
	var hs []*Handle
	for i := 0; i < 20; i++ {
		hs = append(hs, c.Send(newGet(t, srv.URL), handler))
	}
	waitFor(t, "2 on the wire and 18 waiting", func() bool { st := c.Stats(); return st.Leased == 2 && st.Pending == 18 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		_, err := h.Await(awaitCtx(t))
		if !errors.Is(err, ErrAborted) || !errors.Is(err, ErrClosed) {
			t.Fatalf("Await after Close: %v, want ErrAborted and ErrClosed", err)
		}
		if h.Linked() {
			t.Fatal("linked after Close")
		}
	}
	if n := notified.Load(); n != 0 {
		t.Fatalf("%d notifications after Close, want 0", n)
	}
}

// leaseHooks are a Handle's hooks as the request path sees them, for a
// request whose Handle was aborted just as it was granted a connection: its
// Leased hook refuses the connection.
type leaseHooks struct {
	refuse error
	leased atomic.Int64
}

func (h *leaseHooks) Leased() error            { h.leased.Add(1); return h.refuse }
func (h *leaseHooks) Replaying(error) bool     { return true }
func (h *leaseHooks) EarlyResponse(error) bool { return true }

// A request aborted between the grant of its connection and its first byte
// (AbortAll stops every Handle before it cancels any) writes nothing and
// gives the connection back as it came: idle, not closed, and served to the
// next request. The server never sees the aborted request.
func TestARequestAbortedAsItIsLeasedGivesTheConnectionBackUnused(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
		t.Run(proto, func(t *testing.T) {
			var seen sync.Map
			var conns *atomic.Int64
			handler := func(w http.ResponseWriter, r *http.Request) {
				seen.Store(r.URL.Path, true)
				io.WriteString(w, "ok")
			}
			var c *Client
			var url string
			if proto == "HTTP/2" {
				srv := newH2Server(t, 0, handler)
				c, url, conns = srv.client(t, Config{}), srv.URL, &srv.conns
			} else {
				srv := newDispatchServer(t, handler)
				c, url, conns = newClient(t, Config{MaxConnsPerRoute: 1}), srv.URL, &srv.newConns
			}
			hooks := &leaseHooks{refuse: ErrAborted}
			if _, err := c.roundTrip(newGet(t, url+"/aborted"), hooks); !errors.Is(err, ErrAborted) || hooks.leased.Load() != 1 {
				t.Fatalf("roundTrip: %v after %d leases; want ErrAborted after 1", err, hooks.leased.Load())
			}
			if st := c.Stats(); st.Leased != 0 || st.Streams != 0 || st.InFlight != 0 || st.Idle != 1 {
				t.Fatalf("after the refused lease: leased %d streams %d in flight %d idle %d; want 0 0 0 1",
					st.Leased, st.Streams, st.InFlight, st.Idle)
			}
			resp, err := c.RoundTrip(newGet(t, url+"/next"))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if _, ok := seen.Load("/aborted"); ok {
				t.Fatal("the server saw the request aborted as it was leased")
			}
			st := waitSettled(t, c)
			if r := st.Routes[0]; conns.Load() != 1 || r.Opened != 1 || r.Closed != 0 || r.Leases != 2 {
				t.Fatalf("the server saw %d connections; route opened %d, closed by %v, leases %d; want 1, 1, none, 2",
					conns.Load(), r.Opened, r.ClosedBy, r.Leases)
			}
		})
	}
}

// AbortAll with streams in flight resets those streams, not their
// connection: nothing stays leased, no Handle is notified, the server sees
// each stream cancelled, and the next request takes a stream on the same
// connection.
func TestAbortAllResetsHTTP2StreamsAndKeepsTheConnection(t *testing.T) {
	const n = 30
	var cancelled atomic.Int64
	g := newGate()
	srv := newH2Server(t, 0, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			g.arrived.Add(1)
			<-r.Context().Done()
			cancelled.Add(1)
			return
		}
		io.WriteString(w, "ok")
	})
	c := srv.client(t, Config{})
	var notified atomic.Int64
	handler := HandlerFuncs{
		Response: func(*Handle, *http.Response) { notified.Add(1) },
		Problem:  func(*Handle, error, bool) bool { notified.Add(1); return false },
	}
	hs := make([]*Handle, n)
	for i := range hs {
		hs[i] = c.Send(newGet(t, srv.URL+"/hang"), handler)
	}
	waitFor(t, "30 streams at the server", func() bool { return g.arrived.Load() == n && c.Stats().Streams == n })

	c.AbortAll()
	st := c.Stats()
	if st.Streams != 0 || st.Leased != 0 || st.Pending != 0 || st.Open != 1 {
		t.Errorf("after AbortAll: %d streams, %d leased, %d pending, %d open; want 0 0 0 1", st.Streams, st.Leased, st.Pending, st.Open)
	}
	for _, h := range hs {
		if _, err := h.Await(awaitCtx(t)); !errors.Is(err, ErrAborted) || h.Linked() {
			t.Fatalf("Await after AbortAll: %v (linked %v), want ErrAborted", err, h.Linked())
		}
	}
	waitFor(t, "the server to see 30 streams cancelled", func() bool { return cancelled.Load() == n })

	h := c.Send(newGet(t, srv.URL+"/ok"), nil)
	resp, err := h.Await(awaitCtx(t))
	if err != nil || resp.ProtoMajor != 2 {
		t.Fatalf("after AbortAll: %v", err)
	}
	h.Close()
	st = waitSettled(t, c)
	if got := srv.conns.Load(); got != 1 || st.Open != 1 || st.Routes[0].Closed != 0 {
		t.Errorf("the server saw %d connections; %d open, closed by %v: want the one connection kept", got, st.Open, st.Routes[0].ClosedBy)
	}
	if got := notified.Load(); got != 0 {
		t.Errorf("%d notifications for aborted Handles, want 0", got)
	}
}

func TestCloseLeavesNoGoroutineBehind(t *testing.T) {
	// Everything this test starts must be gone once it has closed it all.
	defer goleak.VerifyNone(t,
		goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
	hang := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	ok := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c, err := New(Config{MaxConnsPerRoute: 2, HandlerWorkers: 3})
	if err != nil {
		t.Fatal(err)
	}
	f := newFinals(20)
	for i := 0; i < 20; i++ {
		c.Send(newGet(t, ok.URL), f.handler())
		c.Send(newGet(t, hang.URL), f.handler()) // pending or on the wire at Close
	}
	f.wg.Wait()
	unread := c.Send(newGet(t, ok.URL), nil) // a response nobody reads
	if _, err := unread.Await(awaitCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	hang.Close()
	ok.Close()
}
