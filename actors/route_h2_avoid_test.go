package actors

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"

	"golang.org/x/net/http2"

	"github.com/connactor/connactor/internal/wait"
)

// h2cServer serves HTTP/2 with prior knowledge on the far ends of net.Pipe
// connections, with a stream limit. Its first dial goes through at once; the
// later ones wait until the test opens the gate.
type h2cServer struct {
	srv  *http2.Server
	gate chan struct{}

	mu    sync.Mutex
	dials int
	peers []net.Conn
	wg    sync.WaitGroup // ServeConn goroutines
}

// withH2C makes the pool's routes dial s: plain http routes speaking HTTP/2.
func withH2C(t testing.TB, maxStreams uint32) (*h2cServer, poolOpt) {
	s := &h2cServer{srv: &http2.Server{MaxConcurrentStreams: maxStreams}, gate: make(chan struct{})}
	t.Cleanup(s.close) // after the pool's own cleanup, which stops the actors
	return s, func(cfg *SupervisorConfig) {
		cfg.Route.Conn.H2C = true // the pool's own Options, made for this pool
		cfg.Route.Conn.DialContext = s.dial
	}
}

func (s *h2cServer) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	s.mu.Lock()
	s.dials++
	first := s.dials == 1
	s.mu.Unlock()
	if !first {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c, peer := net.Pipe()
	s.mu.Lock()
	s.peers = append(s.peers, peer)
	s.mu.Unlock()
	s.wg.Go(func() { // owned by s: close waits for it
		s.srv.ServeConn(peer, &http2.ServeConnOpts{Handler: http.NotFoundHandler()})
	})
	return c, nil
}

func (s *h2cServer) openGate() { close(s.gate) }

func (s *h2cServer) close() {
	s.mu.Lock()
	for _, c := range s.peers {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// askAvoiding sends a LeaseRequest that avoids connection avoid.
func (p *pool) askAvoiding(h *routeHandle, avoid uint64) *wait.Ticket[Lease] {
	t := &wait.Ticket[Lease]{}
	p.sys.Root.Send(h.PID, &LeaseRequest{Ticket: t, Avoid: avoid})
	return t
}

// A replay that queued (its Avoid names the connection that refused it) is
// not granted a stream of that connection when one frees up there: it waits
// for the route's next connection.
func TestRouteNeverGrantsAQueuedWaiterAStreamOfTheConnectionItAvoids(t *testing.T) {
	s, opt := withH2C(t, 1)
	p := newPool(t, 2, 10, opt)
	h := p.route("a")
	first := p.leased(p.ask(h))
	if first.H2 == nil {
		t.Fatal("the lease is no HTTP/2 stream")
	}

	replay := p.askAvoiding(h, first.ConnID)
	if !p.waiting(h, replay) {
		t.Fatal("the replay was served while the only connection is full")
	}
	p.release(h, true, first) // the avoided connection has a free stream now
	if !p.waiting(h, replay) {
		l, _, _ := replay.Result()
		t.Fatalf("the replay was granted connection %d, which it avoids", l.ConnID)
	}

	s.openGate() // the route's second connection
	got := p.leased(replay)
	if got.ConnID == first.ConnID || got.H2 == nil {
		t.Fatalf("the replay got connection %d (h2 %v), want a stream of another one", got.ConnID, got.H2 != nil)
	}
	p.release(h, true, got)
}

// A replay that avoids a connection with free streams gets a dial of its
// own, and callers who queue behind it still take that connection's streams.
func TestRouteDialsForAWaiterThatAvoidsTheConnectionWithRoom(t *testing.T) {
	s, opt := withH2C(t, 4)
	s.openGate()
	p := newPool(t, 2, 10, opt)
	h := p.route("a")
	first := p.leased(p.ask(h))
	eventually(t, "the server's SETTINGS known", func() bool { return first.H2.Streams().Settings })

	replay := p.askAvoiding(h, first.ConnID)
	next := p.ask(h)
	got := p.leased(replay)
	if got.ConnID == first.ConnID {
		t.Fatalf("the replay got connection %d, which it avoids", got.ConnID)
	}
	if l := p.leased(next); l.ConnID != first.ConnID && l.ConnID != got.ConnID {
		t.Fatalf("the caller behind the replay got connection %d", l.ConnID)
	} else {
		p.release(h, true, l)
	}
	p.release(h, true, first, got)
}

// A caller that arrives while only a replay avoiding the connection with room
// waits takes a stream of it at once: it does not queue behind a waiter that
// cannot use that connection.
func TestRouteDoesNotQueueACallerBehindAWaiterThatAvoidsTheFreeConnection(t *testing.T) {
	_, opt := withH2C(t, 4) // the gate stays shut: the replay's dial never ends
	p := newPool(t, 2, 10, opt)
	h := p.route("a")
	first := p.leased(p.ask(h))
	eventually(t, "the server's SETTINGS known", func() bool { return first.H2.Streams().Settings })

	replay := p.askAvoiding(h, first.ConnID)
	if !p.waiting(h, replay) {
		t.Fatal("the replay was served while its dial is held")
	}
	waits := len(p.stats(h).RecentWaits) // the first caller's, which waited for the dial
	next := p.leased(p.ask(h))
	if next.ConnID != first.ConnID {
		t.Fatalf("the new caller got connection %d, want a stream of %d", next.ConnID, first.ConnID)
	}
	st := p.stats(h)
	if st.Pending != 1 || len(st.RecentWaits) != waits {
		t.Fatalf("pending %d, recent waits %+v; want the replay alone waiting and the new caller not queued", st.Pending, st.RecentWaits)
	}
	p.release(h, true, first, next)
}

// A replay that avoids an idle HTTP/2 connection (it refused the request
// without draining, and went back to the idle list) is not handed that
// connection from the idle list: it waits for another.
func TestRouteDoesNotLeaseAReplayTheIdleConnectionItAvoids(t *testing.T) {
	s, opt := withH2C(t, 4) // the gate stays shut until the end: the replay's dial waits
	p := newPool(t, 2, 10, opt)
	h := p.route("a")
	first := p.leased(p.ask(h))
	p.release(h, true, first) // idle now
	replay := p.askAvoiding(h, first.ConnID)
	if !p.waiting(h, replay) {
		l, _, _ := replay.Result()
		t.Fatalf("the replay was granted connection %d at once; it avoids %d", l.ConnID, first.ConnID)
	}
	s.openGate()
	got := p.leased(replay)
	if got.ConnID == first.ConnID {
		t.Fatalf("the replay got connection %d, which it avoids", got.ConnID)
	}
	p.release(h, true, got)
}
