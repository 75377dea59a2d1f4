package client

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
)

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
	waitUntil(t, "all 200 streams at the server", func() bool { return g.arrived.Load() == n })
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
	waitUntil(t, "30 streams at the server", func() bool { return g.arrived.Load() == n && c.Stats().Streams == n })

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
	waitUntil(t, "the server to see 30 streams cancelled", func() bool { return cancelled.Load() == n })

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
