package client

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// connCounter counts, on the server's side, the connections a test server
// accepted and the Proxy-Authorization headers its requests carried.
type connCounter struct {
	mu        sync.Mutex
	conns     int
	requests  int
	proxyAuth int
}

func (cc *connCounter) connState(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		cc.mu.Lock()
		cc.conns++
		cc.mu.Unlock()
	}
}

func (cc *connCounter) snapshot() (conns, requests, proxyAuth int) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.conns, cc.requests, cc.proxyAuth
}

// countingServer returns an unstarted server answering "ok" that counts into cc.
func countingServer(cc *connCounter) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cc.mu.Lock()
		cc.requests++
		if r.Header.Get("Proxy-Authorization") != "" {
			cc.proxyAuth++
		}
		cc.mu.Unlock()
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = cc.connState
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	return srv
}

// dispatchServer is an httptest server that counts, on the server side, the
// requests of each path and the connections it accepted and saw closed.
type dispatchServer struct {
	*httptest.Server
	newConns    atomic.Int64
	closedConns atomic.Int64
	mu          sync.Mutex
	paths       map[string]int
}

// waitOpenAtMost waits until the server sees at most n connections open. It
// learns of a close when its read ends, which may be after it accepted the
// next connection: a check right after the client's own must wait for it to
// catch up.
func (s *dispatchServer) waitOpenAtMost(t *testing.T, n int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the server to see at most %d connections open", n), func() bool {
		return s.newConns.Load()-s.closedConns.Load() <= n
	})
}

func newDispatchServer(t *testing.T, h http.HandlerFunc) *dispatchServer {
	t.Helper()
	s := &dispatchServer{paths: map[string]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths[r.URL.Path]++
		s.mu.Unlock()
		h(w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.newConns.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closedConns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *dispatchServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paths[path]
}

// connTracker counts a test server's connections as the server sees them, to
// prove limits from outside the client. A client that closes one connection and
// opens another is seen by the server in either order, so a count above the
// limit is only recorded if it persists for settle (a real excess does: pooled
// connections stay open).
type connTracker struct {
	mu            sync.Mutex
	open, total   int
	maxOpen       int
	limit         int
	settle        time.Duration
	parent        *connTracker   // a tracker shared by several servers (the total)
	changed       chan struct{}  // closed and replaced at each close, to wake the excess checks
	longestSettle time.Duration  // longest wait for the server to see a replaced connection close
	checks        sync.WaitGroup // excess checks in flight
}

func newTracker(limit int, parent *connTracker) *connTracker {
	return &connTracker{limit: limit, settle: 500 * time.Millisecond, parent: parent, changed: make(chan struct{})}
}

func (t *connTracker) connState(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		t.opened()
		if t.parent != nil {
			t.parent.opened()
		}
	case http.StateClosed, http.StateHijacked:
		t.closedOne()
		if t.parent != nil {
			t.parent.closedOne()
		}
	}
}

// opened counts a new connection. It must not block: the server calls it from
// its accept loop, and a connection the client already closed is only seen
// closed once the loop has moved on. An excess is checked on a goroutine of its
// own, which looks again at each close until the count is back within the
// limit or settle has passed.
func (t *connTracker) opened() {
	t.mu.Lock()
	t.open++
	t.total++
	o := t.open
	if o <= t.limit && o > t.maxOpen {
		t.maxOpen = o
	}
	t.mu.Unlock()
	if o <= t.limit {
		return
	}
	t.checks.Add(1)
	go func() { // owned by t.checks, waited for by snapshot
		defer t.checks.Done()
		start := time.Now()
		settled := time.NewTimer(t.settle)
		defer settled.Stop()
		expired := false
		for {
			t.mu.Lock()
			o, changed := t.open, t.changed
			if o <= t.limit || expired {
				if o > t.maxOpen {
					t.maxOpen = o
				}
				if d := time.Since(start); d > t.longestSettle {
					t.longestSettle = d
				}
				t.mu.Unlock()
				return
			}
			t.mu.Unlock()
			select {
			case <-changed:
			case <-settled.C:
				expired = true
			}
		}
	}()
}

func (t *connTracker) closedOne() {
	t.mu.Lock()
	t.open--
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
}

func (t *connTracker) snapshot() (open, total, maxOpen int) {
	t.checks.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.open, t.total, t.maxOpen
}

// waitOpen waits until the server sees exactly n open connections.
func (t *connTracker) waitOpen(tb testing.TB, n int) {
	tb.Helper()
	waitFor(tb, fmt.Sprintf("server to see %d open connections", n), func() bool {
		o, _, _ := t.snapshot()
		return o == n
	})
}

// newServer starts a test server whose connections are counted by t.
func newServer(tb testing.TB, t *connTracker, h http.Handler) *httptest.Server {
	tb.Helper()
	srv := httptest.NewUnstartedServer(h)
	if t != nil {
		srv.Config.ConnState = t.connState
	}
	srv.Start()
	tb.Cleanup(srv.Close)
	return srv
}

var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
