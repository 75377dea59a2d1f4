package actors

import (
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/internal/testkit/logrec"
	"github.com/connactor/connactor/internal/wait"
)

// withAdaptive gives the pool's routes an adaptive limit starting at initial.
func withAdaptive(initial int) poolOpt {
	return func(cfg *SupervisorConfig) { cfg.Route.Adaptive = &AdaptiveLimit{Min: 1, Initial: initial} }
}

// withQueueTarget makes the pool's routes shed a queue that stands above target.
func withQueueTarget(target time.Duration) poolOpt {
	return func(cfg *SupervisorConfig) { cfg.Route.QueueTarget = target }
}

// withLogs sends the pool's and its routes' logs to logs.
func withLogs(logs *logrec.Recorder) poolOpt {
	return func(cfg *SupervisorConfig) { cfg.Logger, cfg.Route.Logger = logs.Logger(), logs.Logger() }
}

// warnedWaitingFor holds n leases of h, makes one more caller wait behind
// them past LongWait, and checks that the one long-wait warning names
// waitsFor as what holds it, with its limit n and n requests in flight. It
// returns the leases held and the waiting caller's ticket. In a bubble.
func (p *pool) warnedWaitingFor(t *testing.T, logs *logrec.Recorder, h *routeHandle, n int, waitsFor string) ([]Lease, *wait.Ticket[Lease]) {
	t.Helper()
	held := p.lease(h, n)
	next := p.ask(h)
	synctest.Wait()
	time.Sleep(LongWait + 100*time.Millisecond)
	synctest.Wait()
	warned := logs.Having("waits_for", waitsFor)
	if len(warned) != 1 || len(logs.Containing(logLongWaits)) != 1 {
		t.Fatalf("%d warnings name the %s, want the one warning (logged: %+v)", len(warned), waitsFor, logs.All())
	}
	if n := strconv.Itoa(n); len(logs.Having("limit", n)) != 1 || len(logs.Having("in_flight", n)) != 1 {
		t.Fatalf("the warning does not say limit=%s in_flight=%s: %+v", n, n, logs.All())
	}
	return held, next
}

// sampled releases l with a latency sample: written at w, its head at w+took.
func (p *pool) sampled(h *routeHandle, l Lease, w time.Time, took time.Duration) {
	p.sys.Root.Send(h.PID, &Released{ConnID: l.ConnID, Reusable: true, latencySample: latencySample{Written: w, Head: w.Add(took), InFlight: l.InFlight}})
}

// pending reports which of ts are still waiting, after the route handled
// everything sent so far.
func (p *pool) pending(h *routeHandle, ts ...*wait.Ticket[Lease]) []bool {
	p.stats(h)
	out := make([]bool, len(ts))
	for i, t := range ts {
		out[i] = !t.Done()
	}
	return out
}

// With an adaptive limit of 2 on a route that may open 8 connections, a
// third and a fourth caller wait in the FIFO while two requests are in
// flight, and each release serves the oldest of them; a response far slower
// than the no-load latency halves the limit, and the next caller waits
// although a connection is idle.
func TestTheAdaptiveLimitHoldsCallersInTheFIFO(t *testing.T) {
	p := newPool(t, 8, 8, withAdaptive(2))
	h := p.route("a")
	held := p.lease(h, 2)
	third, fourth := p.ask(h), p.ask(h)
	if w := p.pending(h, third, fourth); !w[0] || !w[1] {
		t.Fatalf("third and fourth callers waiting: %v, want both", w)
	}
	st := p.stats(h)
	if st.Limit != 2 || st.InFlight != 2 || st.Pending != 2 || st.Open != 2 || st.Max != 8 {
		t.Fatalf("limit %d, in flight %d, pending %d, open %d, max %d; want 2, 2, 2, 2, 8",
			st.Limit, st.InFlight, st.Pending, st.Open, st.Max)
	}
	base := time.Now()
	p.sampled(h, held[0], base, 10*time.Millisecond) // the no-load latency: 10 ms
	got := p.leased(third)
	if w := p.pending(h, fourth); !w[0] {
		t.Fatal("the fourth caller was served before a second release")
	}
	// Each lease says how many of the route's requests were in flight with
	// it, for its sample: 1 and 2 for the first two, 2 for the third.
	if held[0].InFlight+held[1].InFlight != 3 || got.InFlight != 2 {
		t.Fatalf("leases in flight with them: %d, %d, then %d; want 1 and 2, then 2", held[0].InFlight, held[1].InFlight, got.InFlight)
	}
	// Ten times the no-load latency: the limit halves (by 0.5 at the most).
	p.sampled(h, held[1], base.Add(time.Millisecond), 100*time.Millisecond)
	if w := p.pending(h, fourth); !w[0] {
		t.Fatal("the fourth caller was served although the limit fell to 1 with 1 request in flight")
	}
	st = p.stats(h)
	if st.Limit != 1 || st.InFlight != 1 || st.Idle != 1 || st.Pending != 1 || st.NoLoad != 10*time.Millisecond {
		t.Fatalf("after a slow response: limit %d, in flight %d, idle %d, pending %d, no-load %v; want 1, 1, 1, 1, 10ms",
			st.Limit, st.InFlight, st.Idle, st.Pending, st.NoLoad)
	}
	p.release(h, true, got)
	p.release(h, true, p.leased(fourth))
	if st := p.stats(h); st.InFlight != 0 || st.Leases != 4 || st.Dialing != 0 || st.Open != 2 {
		t.Fatalf("after every release: in flight %d, leases %d, dialing %d, open %d; want 0, 4, 0, 2",
			st.InFlight, st.Leases, st.Dialing, st.Open)
	}
}

// Without Adaptive, a route reports its fixed limit and no no-load latency,
// and nothing holds its callers but its connections.
func TestWithoutAdaptiveTheLimitIsTheFixedOne(t *testing.T) {
	p := newPool(t, 3, 8)
	h := p.route("a")
	held := p.lease(h, 3)
	st := p.stats(h)
	if st.Limit != 3 || st.InFlight != 3 || st.NoLoad != 0 || st.Shed != 0 {
		t.Fatalf("limit %d, in flight %d, no-load %v, shed %d; want 3, 3, 0, 0", st.Limit, st.InFlight, st.NoLoad, st.Shed)
	}
	p.release(h, true, held...)
}

// On HTTP/2 the limit counts streams: one connection that takes 100 streams
// carries no more than the limit's 3, the others wait, and a stream's end
// serves the oldest of them.
func TestHTTP2StreamsCountAgainstTheAdaptiveLimit(t *testing.T) {
	s, opt := withH2C(t, 100)
	s.openGate()
	p := newPool(t, 4, 8, opt, withAdaptive(3))
	h := p.h2Route()
	held := p.lease(h, 3)
	fourth, fifth := p.ask(h), p.ask(h)
	if w := p.pending(h, fourth, fifth); !w[0] || !w[1] {
		t.Fatalf("fourth and fifth callers waiting: %v, want both", w)
	}
	st := p.stats(h)
	if st.Limit != 3 || st.InFlight != 3 || st.Streams != 3 || st.Open != 1 || st.Pending != 2 {
		t.Fatalf("limit %d, in flight %d, streams %d, open %d, pending %d; want 3, 3, 3, 1, 2",
			st.Limit, st.InFlight, st.Streams, st.Open, st.Pending)
	}
	p.release(h, true, held[0])
	next := p.leased(fourth)
	if w := p.pending(h, fifth); !w[0] {
		t.Fatal("the fifth caller was served with the limit's 3 streams in flight")
	}
	p.release(h, true, held[1], held[2], next)
	p.release(h, true, p.leased(fifth))
	if st := p.stats(h); st.InFlight != 0 || st.Streams != 0 || st.Open != 1 {
		t.Fatalf("after every release: in flight %d, streams %d, open %d; want 0, 0, 1", st.InFlight, st.Streams, st.Open)
	}
}

// The outbox offers no connection that would put the route over its limit:
// with four idle connections and a limit of 2, two are on offer, and once
// both are taken a caller waits although two connections are idle.
func TestTheOutboxOffersNoConnectionBeyondTheLimit(t *testing.T) {
	p := newPool(t, 4, 8, withAdaptive(4))
	h := p.route("a")
	held := p.lease(h, 4)
	base := time.Now()
	p.sampled(h, held[0], base, 10*time.Millisecond)
	p.sampled(h, held[1], base.Add(time.Millisecond), 100*time.Millisecond) // the limit halves, once
	p.sampled(h, held[2], base.Add(2*time.Millisecond), 100*time.Millisecond)
	p.sampled(h, held[3], base.Add(3*time.Millisecond), 100*time.Millisecond)
	p.offers(h, 2)
	if st := p.stats(h); st.Limit != 2 || st.Idle != 4 || st.InFlight != 0 {
		t.Fatalf("limit %d, idle %d, in flight %d; want 2, 4, 0", st.Limit, st.Idle, st.InFlight)
	}
	a, okA := p.take(h)
	b, okB := p.take(h)
	if !okA || !okB {
		t.Fatal("the two offers could not be taken")
	}
	third := p.ask(h)
	if w := p.pending(h, third); !w[0] {
		t.Fatal("a third caller was served with the limit's 2 requests in flight")
	}
	if st := p.stats(h); st.InFlight != 2 || st.Idle != 2 || len(h.outbox) != 0 {
		t.Fatalf("in flight %d, idle %d, offers %d; want 2, 2, 0", st.InFlight, st.Idle, len(h.outbox))
	}
	p.release(h, true, a)
	p.release(h, true, b, p.leased(third))
}

// The long-wait warning names the adaptive limit when it is what holds the
// callers, with the limit and the requests in flight.
func TestALongWaitWarningNamesTheAdaptiveLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settleDeadLetters(t)
		logs := &logrec.Recorder{}
		p := newPool(t, 4, 8, withAdaptive(1), withLogs(logs))
		h := p.route("a")
		held, next := p.warnedWaitingFor(t, logs, h, 1, "adaptive limit")
		p.release(h, true, held...)
		p.release(h, true, p.leased(next))
	})
}

// QueueTarget sheds a standing queue: with one connection held and three
// callers waiting, none served, the queue stands for the whole interval,
// and all three are refused with ErrOverloaded (which is
// ErrNotSent) while the lease held goes on; no connection is dialed for them.
func TestAStandingQueueIsShed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settleDeadLetters(t)
		p := newPool(t, 1, 8, withQueueTarget(50*time.Millisecond))
		h := p.route("a")
		held := p.lease(h, 1)
		ts := []*wait.Ticket[Lease]{p.ask(h), p.ask(h), p.ask(h)}
		synctest.Wait()
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		for i, tk := range ts {
			_, err := result(t, tk)
			if !errors.Is(err, ErrOverloaded) || !errors.Is(err, ErrNotSent) {
				t.Fatalf("caller %d: %v, want ErrOverloaded and ErrNotSent", i, err)
			}
		}
		st := p.stats(h)
		if st.Shed != 3 || st.Pending != 0 || st.InFlight != 1 || st.Opened != 1 || st.Leases != 1 {
			t.Fatalf("shed %d, pending %d, in flight %d, opened %d, leases %d; want 3, 0, 1, 1, 1",
				st.Shed, st.Pending, st.InFlight, st.Opened, st.Leases)
		}
		p.release(h, true, held...)
	})
}

// A burst that drains within the interval is never shed: three callers
// behind one connection, served 30, 60 and 90 ms after they queued (the
// last two over the 50 ms target), all get their lease.
func TestABurstThatDrainsIsNeverShed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settleDeadLetters(t)
		p := newPool(t, 1, 8, withQueueTarget(50*time.Millisecond))
		h := p.route("a")
		cur := p.lease(h, 1)[0]
		ts := []*wait.Ticket[Lease]{p.ask(h), p.ask(h), p.ask(h)}
		synctest.Wait()
		for i, tk := range ts {
			time.Sleep(30 * time.Millisecond)
			p.release(h, true, cur)
			synctest.Wait()
			l, err := result(t, tk)
			if err != nil {
				t.Fatalf("caller %d, served after %d ms: %v", i, 30*(i+1), err)
			}
			cur = l
		}
		if st := p.stats(h); st.Shed != 0 || st.Leases != 4 {
			t.Fatalf("shed %d, leases %d; want 0, 4", st.Shed, st.Leases)
		}
		p.release(h, true, cur)
	})
}

// With both, a route sheds what its adaptive limit holds back once that
// queue stands: the limit of 1 serves one caller at a time, and the callers
// behind it that wait past the target through the interval are refused.
func TestTheQueueTargetShedsWhatTheAdaptiveLimitHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settleDeadLetters(t)
		p := newPool(t, 4, 8, withAdaptive(1), withQueueTarget(20*time.Millisecond))
		h := p.route("a")
		held := p.lease(h, 1)
		ts := []*wait.Ticket[Lease]{p.ask(h), p.ask(h)}
		synctest.Wait()
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		for i, tk := range ts {
			if _, err := result(t, tk); !errors.Is(err, ErrOverloaded) {
				t.Fatalf("caller %d: %v, want ErrOverloaded", i, err)
			}
		}
		if st := p.stats(h); st.Shed != 2 || st.Open != 1 || st.Limit != 1 {
			t.Fatalf("shed %d, open %d, limit %d; want 2, 1, 1", st.Shed, st.Open, st.Limit)
		}
		p.release(h, true, held...)
	})
}

// A standing queue is held at the target: with the one connection held and
// a caller every 10 ms, once the queue has stood for the interval every
// caller is refused as soon as it has waited longer than the 50 ms target,
// so no more than the six who came within the last 50 ms wait at any time;
// the refusals' own short waits do not let the queue build again.
func TestAStandingQueueIsHeldAtTheTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settleDeadLetters(t)
		p := newPool(t, 1, 8, withQueueTarget(50*time.Millisecond))
		h := p.route("a")
		held := p.lease(h, 1)
		var ts []*wait.Ticket[Lease]
		for i := range 50 {
			ts = append(ts, p.ask(h))
			synctest.Wait()
			if st := p.stats(h); i >= 10 && st.Pending > 6 {
				t.Fatalf("%d ms after the queue formed, %d callers wait, want at most the 6 of the last 50 ms", 10*i, st.Pending)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		for i, tk := range ts {
			if _, err := result(t, tk); !errors.Is(err, ErrOverloaded) {
				t.Fatalf("caller %d: %v, want ErrOverloaded", i, err)
			}
		}
		p.release(h, true, held...)
	})
}

// MaxConnsPerHost below MaxConnsPerRoute is the route's limit: Stats.Limit
// says 2 of the 8 connections the route may open, and a caller held behind
// the two in flight is warned about as waiting for MaxConnsPerHost, with the
// limit.
func TestALimitOfTheHostBelowTheRoutesIsItsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settleDeadLetters(t)
		logs := &logrec.Recorder{}
		p := newPool(t, 8, 8, withLogs(logs), func(cfg *SupervisorConfig) { cfg.MaxConnsPerHost = 2 })
		h := p.route("a")
		if st := p.stats(h); st.Limit != 2 || st.Max != 8 {
			t.Fatalf("limit %d, max %d; want 2, 8", st.Limit, st.Max)
		}
		held, next := p.warnedWaitingFor(t, logs, h, 2, "MaxConnsPerHost")
		p.release(h, true, held...)
		p.release(h, true, p.leased(next))
	})
}

// The fleet share is the route's limit once the keeper has told one below
// it: with a share of 1 connection of the 2 the route may open, Stats.Limit
// says 1, and a caller held behind the one in flight is warned about as
// waiting for the fleet share, with the limit; a larger share raises it.
func TestAFleetShareBelowTheRoutesLimitIsItsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		settleDeadLetters(t)
		logs := &logrec.Recorder{}
		p := newPool(t, 2, 8, withLogs(logs), func(cfg *SupervisorConfig) {
			cfg.Fleet = actor.NewPID("nonhost", "a keeper that never answers")
			cfg.FleetInterval = time.Hour
		})
		p.sys.Root.Send(p.sup, &ShareChanged{Route: "http://a:80", Share: 1, Budget: 4})
		h := p.route("a")
		if st := p.stats(h); st.Limit != 1 {
			t.Fatalf("limit %d, want the share's 1", st.Limit)
		}
		held, next := p.warnedWaitingFor(t, logs, h, 1, "fleet share")
		p.sys.Root.Send(p.sup, &ShareChanged{Route: "http://a:80", Share: 3, Budget: 4})
		got := p.leased(next)
		if st := p.stats(h); st.Limit != 2 {
			t.Fatalf("limit %d with a share of 3, want MaxConnsPerRoute's 2", st.Limit)
		}
		p.release(h, true, held...)
		p.release(h, true, got)
	})
}
