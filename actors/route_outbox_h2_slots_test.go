package actors

import (
	"testing"
	"time"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
)

// withClock makes c the route actors' clock.
func withClock(c *fakeClock) poolOpt {
	return func(cfg *SupervisorConfig) { cfg.Route.Now = c.Now }
}

// Stream slots on offer carry the idle time and the due time of their
// connection as it is when they are offered: once the connection is used
// and idle again, the route offers them anew. An idle connection (since T0,
// MaxIdleTime a minute) is used at T0+50s; at T0+70s, past the first
// slots' due time and well before the connection's, every slot on offer is
// taken, idle for 20s, none declined, and nothing is closed.
func TestStreamSlotsOnOfferCarryTheirConnectionsLastIdleTime(t *testing.T) {
	s, opt := withH2C(t, 4)
	s.openGate()
	clock := &fakeClock{now: time.Now()}
	p := newPool(t, 16, 16, opt, withClock(clock))
	h := p.h2Route(4)
	clock.advance(50 * time.Second)
	l, ok := h.take(clock.Now())
	if !ok || l.IdleTime != 50*time.Second {
		t.Fatalf("the first slot: %+v, %v; want it idle for 50s", l, ok)
	}
	p.release(h, true, l) // idle again, from T0+50s
	p.offers(h, 4)
	before := p.stats(h)
	clock.advance(20 * time.Second)
	var ls []Lease
	for i := range 4 {
		l, ok := h.take(clock.Now())
		if !ok || l.IdleTime != 20*time.Second {
			t.Fatalf("slot %d at T0+70s: %+v, %v; want it taken, idle for 20s", i, l, ok)
		}
		ls = append(ls, l)
	}
	p.release(h, true, ls...)
	p.offers(h, 4)
	st := p.stats(h)
	if st.Open != 1 || st.Closed != 0 || st.Leases != before.Leases+4 || st.Offered != before.Offered+4 || st.Streams != 0 {
		t.Fatalf("after the four slots' releases: %+v (offered %d, streams %d)", st, st.Offered, st.Streams)
	}
}

// A connection whose lifetime ends while its slots are on offer is retired
// by the next message the route handles: its slots are taken back and, with
// no stream in flight, it closes then, as lifetime; a slot a caller holds
// is a stream in flight, and the connection closes when it is released.
func TestAConnectionOnOfferPastItsLifetimeIsTakenBackAndClosed(t *testing.T) {
	for _, held := range []bool{false, true} {
		name := "idle"
		if held {
			name = "a slot held"
		}
		t.Run(name, func(t *testing.T) {
			s, opt := withH2C(t, 4)
			s.openGate()
			clock := &fakeClock{now: time.Now()}
			p := newPool(t, 16, 16, opt, withClock(clock), func(cfg *SupervisorConfig) {
				cfg.Route.MaxIdleTime = time.Hour
				cfg.Route.MaxLifetime = 10 * time.Minute
			})
			h, first := p.h2RouteOf(4)
			var l Lease
			if held {
				var ok bool
				if l, ok = h.take(clock.Now()); !ok {
					t.Fatal("no slot on offer")
				}
			}
			clock.advance(11 * time.Minute)
			// The connection's own news (its peer's SETTINGS): a message
			// that neither leases nor takes offers back.
			p.sys.Root.Send(h.PID, &conn.StreamsChanged{ID: first.ConnID})
			p.offers(h, 0)
			st := p.stats(h)
			if held {
				if st.Open != 1 || st.Streams != 1 || st.Leased != 1 {
					t.Fatalf("with a slot held: %+v (streams %d)", st, st.Streams)
				}
				p.release(h, true, l)
				p.offers(h, 0)
				st = p.stats(h)
			}
			if st.Open != 0 || st.ClosedBy[string(route.ReasonLifetime)] != 1 {
				t.Fatalf("past its lifetime: %+v", st)
			}
		})
	}
}

// An offer that a take-back counted as taken, of a connection that closed
// since, given back unused by its caller (its request given up, or the
// offer declined past its due time): the route counts no lease for it, as
// it counts none for an offer given back while its connection is open.
// Stats after it are those before the offer was taken. For a stream slot,
// the server closes the connection; for an HTTP/1.1 connection, its actor
// stops under its holder.
func TestAnOfferGivenBackAfterItsConnectionClosedCountsNoLease(t *testing.T) {
	for _, tc := range []struct {
		name    string
		h2      bool
		decline bool
	}{
		{"slot given up", true, false},
		{"slot declined", true, true},
		{"HTTP/1.1 given up", false, false},
		{"HTTP/1.1 declined", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p *pool
			var h *routeHandle
			var s *h2cServer
			if tc.h2 {
				var opt poolOpt
				s, opt = withH2C(t, 4)
				s.openGate()
				p = newPool(t, 16, 16, opt)
				h = p.h2Route(4)
			} else {
				p = newPool(t, 4, 4)
				h = p.idleRoute("a", 1)
				p.offers(h, 1)
			}
			before := p.stats(h)
			l, ok := p.take(h)
			if !ok {
				t.Fatal("nothing on offer")
			}
			p.sys.Root.Send(h.PID, &ExpiryTicked{Now: time.Now()}) // a take-back: the offer is counted taken
			if st := p.stats(h); st.Leases != before.Leases+1 || st.Leased != 1 {
				t.Fatalf("after the take-back: %+v", st)
			}
			if tc.h2 {
				s.close() // the server's ends close: the connection closes, the slot still held
			} else {
				p.sys.Root.Stop(l.Conn)
			}
			eventually(t, "the connection closed", func() bool { return p.stats(h).Open == 0 })
			if tc.decline {
				h.post(&OfferDeclined{ConnID: l.ConnID, At: time.Now()})
			} else {
				p.giveBack(h, l)
			}
			st := p.stats(h)
			if st.Leases != before.Leases || st.Reuses != before.Reuses || st.Offered != before.Offered ||
				st.Open != 0 || st.Leased != 0 || st.Idle != 0 || st.Streams != 0 || st.Closed != before.Closed+1 {
				t.Fatalf("after the offer came back: %+v; want leases %d, reuses %d, offered %d, one more closed, nothing open",
					st.Stats, before.Leases, before.Reuses, before.Offered)
			}
		})
	}
}
