package client

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/testkit/calls"
)

// connLog records, at an HTTP/2 server, which connection (the client's
// address) each request arrived on, and holds the paths under /held/ until
// the gate opens.
type connLog struct {
	mu     sync.Mutex
	byPath map[string]string
	count  map[string]int
	g      *gate
}

func newConnLog() *connLog {
	return &connLog{byPath: map[string]string{}, count: map[string]int{}, g: newGate()}
}

func (l *connLog) handler(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	l.byPath[r.URL.Path] = r.RemoteAddr
	l.count[r.RemoteAddr]++
	l.mu.Unlock()
	if len(r.URL.Path) > 6 && r.URL.Path[:6] == "/held/" {
		l.g.handler(w, r)
		return
	}
	io.WriteString(w, "ok "+r.URL.Path)
}

// conn returns the connection path arrived on.
func (l *connLog) conn(path string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byPath[path]
}

// most returns the most requests any connection carried.
func (l *connLog) most() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := 0
	for _, n := range l.count {
		m = max(m, n)
	}
	return m
}

// sendHeld starts GETs of /held/<name> and returns their errors' channel.
func sendHeld(t *testing.T, c *Client, base string, names ...string) chan error {
	errs := make(chan error, len(names))
	for _, name := range names {
		go func() { // owned by the test, which drains errs
			resp, err := c.RoundTrip(newGet(t, base+"/held/"+name))
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	return errs
}

// An HTTP/2 connection that reached MaxRequestsPerConn takes no new stream,
// even while the ones it carries are in flight: new requests go to another
// connection, and it closes when its last stream ends. No request fails.
func TestAnHTTP2ConnectionAtMaxRequestsPerConnTakesNoNewStream(t *testing.T) {
	const limit = 10
	l := newConnLog()
	srv := newH2Server(t, 0, l.handler)
	c := srv.client(t, Config{MaxRequestsPerConn: limit})
	var first, second []string
	for i := range limit {
		first = append(first, fmt.Sprintf("a%d", i))
	}
	for i := range 5 {
		second = append(second, fmt.Sprintf("b%d", i))
	}
	errsA := sendHeld(t, c, srv.URL, first...)
	waitFor(t, "10 streams at the server", func() bool { return l.g.arrived.Load() == limit })
	errsB := sendHeld(t, c, srv.URL, second...)
	waitFor(t, "15 streams at the server", func() bool { return l.g.arrived.Load() == limit+5 })
	a, b := l.conn("/held/a0"), l.conn("/held/b0")
	for _, name := range second {
		if got := l.conn("/held/" + name); got == a || got != b {
			t.Errorf("request %s on connection %s: the first connection (%s) has served its %d requests", name, got, a, limit)
		}
	}
	close(l.g.open)
	drain(t, errsA, limit)
	drain(t, errsB, 5)

	// Under load: 300 requests from 16 callers, never more than 10 on a connection.
	if failed := calls.H2Load(t, c, srv.URL, 300, 16, true); failed > 0 {
		t.Fatalf("%d of 300 requests failed", failed)
	}
	st := waitSettled(t, c)
	r := st.Routes[0]
	t.Logf("MaxRequestsPerConn %d: %d connections at the server, closed by %v", limit, srv.conns.Load(), r.ClosedBy)
	if m := l.most(); m > limit {
		t.Errorf("a connection carried %d requests, more than MaxRequestsPerConn %d", m, limit)
	}
	if got, want := r.ClosedBy["max_requests"], uint64(315/limit); got < want || r.Closed != got {
		t.Errorf("closed by %v, want at least %d closed for max_requests and no other reason", r.ClosedBy, want)
	}
}

// An HTTP/2 connection past its MaxLifetime takes no new stream: one that
// carries streams drains (new requests go to another connection) and closes
// when its last stream ends; an idle one is not used again. The lifetimes
// pass on the fake clock of a testing/synctest bubble, over the in-memory
// network.
func TestAnHTTP2ConnectionPastItsLifetimeTakesNoNewStream(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		const lifetime = 300 * time.Millisecond
		l := newConnLog()
		srv := newMemH2Server(t, 0, l.handler)
		c := srv.client(t, Config{MaxLifetime: lifetime})

		// Streams in flight on a connection that outlives its lifetime.
		start := time.Now()
		errsA := sendHeld(t, c, srv.URL, "a0", "a1", "a2")
		waitFor(t, "3 streams at the server", func() bool { return l.g.arrived.Load() == 3 })
		time.Sleep(lifetime - time.Since(start) + 50*time.Millisecond) // its lifetime passes
		errsB := sendHeld(t, c, srv.URL, "b0", "b1")
		waitFor(t, "5 streams at the server", func() bool { return l.g.arrived.Load() == 5 })
		a, b := l.conn("/held/a0"), l.conn("/held/b0")
		if a == b || l.conn("/held/b1") != b {
			t.Errorf("requests after the lifetime on %s and %s, the old connection is %s: want a new one",
				b, l.conn("/held/b1"), a)
		}
		close(l.g.open)
		drain(t, errsA, 3)
		drain(t, errsB, 2)
		st := waitSettled(t, c)
		if r := st.Routes[0]; r.ClosedBy["lifetime"] != 1 || st.Open != 1 {
			t.Errorf("closed by %v, %d open: want the old connection closed for its lifetime and the new one open", r.ClosedBy, st.Open)
		}

		// An idle connection past its lifetime.
		idleSince := time.Now()
		time.Sleep(lifetime - time.Since(idleSince) + 50*time.Millisecond) // b, made before, is past its lifetime
		if got := get(t, c, srv.URL+"/c"); got != "ok /c" {
			t.Fatal(got)
		}
		if got := l.conn("/c"); got == b || got == a {
			t.Errorf("a request after the idle connection's lifetime used it (%s)", got)
		}
		st = waitSettled(t, c)
		if r := st.Routes[0]; r.ClosedBy["lifetime"] != 2 || st.Open != 1 || srv.conns.Load() != 3 {
			t.Errorf("closed by %v, %d open, %d connections at the server: want 2 closed for their lifetime, 1 open, 3 in all",
				r.ClosedBy, st.Open, srv.conns.Load())
		}
	})
}
