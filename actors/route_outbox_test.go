package actors

import (
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

// The outbox and the FIFO: a caller that queued is never overtaken by one
// that takes an offer later. Two connections, both on offer, both taken
// without a message; W queues; a release goes to W, not to the outbox; X and
// Y find the outbox empty and queue behind W; releases serve them in order.
func TestAnOfferNeverOvertakesAQueuedCaller(t *testing.T) {
	p := newPool(t, 2, 8)
	h := p.idleRoute("a", 2)
	p.offers(h, 2)
	a, ok1 := p.take(h)
	b, ok2 := p.take(h)
	if !ok1 || !ok2 || a.ConnID == b.ConnID || !a.Reused || !a.Offered {
		t.Fatalf("took %+v %v, %+v %v", a, ok1, b, ok2)
	}
	if _, ok := p.take(h); ok {
		t.Fatal("a third offer from two connections")
	}
	w := p.ask(h)
	if !p.waiting(h, w) {
		t.Fatal("W was served with both connections taken")
	}
	p.release(h, true, a)
	got := p.leased(w)
	if got.ConnID != a.ConnID || got.Offered || got.QueuePos != 1 {
		t.Fatalf("W got %+v, want connection %d from the FIFO", got, a.ConnID)
	}
	p.offers(h, 0) // the release went to W
	x, y := p.ask(h), p.ask(h)
	if !p.waiting(h, x) || !p.waiting(h, y) {
		t.Fatal("X or Y served with every connection held")
	}
	if _, ok := p.take(h); ok {
		t.Fatal("an offer while callers wait")
	}
	p.release(h, true, b)
	if l := p.leased(x); l.ConnID != b.ConnID || !p.waiting(h, y) {
		t.Fatalf("X got %+v; Y waiting %v", l, !y.Done())
	}
	p.release(h, true, got)
	if l := p.leased(y); l.ConnID != got.ConnID {
		t.Fatalf("Y got %+v", l)
	}
	if st := p.stats(h); st.Offered != 2 || st.Leases != 7 || st.Pending != 0 {
		t.Fatalf("stats: %d offered, %d leases, %d pending; want 2, 7, 0", st.Offered, st.Leases, st.Pending)
	}
}

// A LeaseRequest that finds no idle connection listed but offers still in the
// outbox is served from them (the route takes them back), rather than
// queueing while a later caller could take them.
func TestALeaseRequestIsServedFromTheOutboxBeforeItQueues(t *testing.T) {
	p := newPool(t, 2, 8)
	h := p.idleRoute("a", 2)
	p.offers(h, 2)
	taken, _ := p.take(h)
	l := p.leased(p.ask(h))
	if l.ConnID == taken.ConnID || l.Offered {
		t.Fatalf("the request got %+v; %d was taken", l, taken.ConnID)
	}
	if st := p.stats(h); st.Leased != 2 || st.Idle != 0 || st.Pending != 0 || st.Offered != 1 {
		t.Fatalf("stats %+v", st)
	}
	p.release(h, true, l, taken)
	p.offers(h, 2)
}

// Stats with offers: those in the outbox count as idle, those taken as
// leased (Leases and Offered count them once the route hears of them).
func TestStatsCountOffersInTheOutboxAsIdleAndTakenOnesAsLeased(t *testing.T) {
	p := newPool(t, 8, 8)
	h := p.idleRoute("a", 6)
	p.offers(h, 4)
	before := p.stats(h)
	taken := []Lease{}
	for i := 0; i < 3; i++ {
		l, ok := p.take(h)
		if !ok {
			t.Fatal("no offer")
		}
		taken = append(taken, l)
	}
	granted := p.leased(p.ask(h)) // from the idle list, least... most recently used
	st := p.stats(h)
	if st.Open != 6 || st.Idle != 2 || st.Leased != 4 || st.Leases != before.Leases+1 {
		t.Fatalf("with 3 taken and 1 granted: %+v", st)
	}
	if got := h.Pub.Idle.Load(); got != 2 {
		t.Fatalf("published %d idle, want 2", got)
	}
	p.release(h, true, append(taken, granted)...)
	st = p.stats(h)
	if st.Idle != 6 || st.Leased != 0 || st.Leases != before.Leases+4 || st.Offered != before.Offered+3 {
		t.Fatalf("after the releases: %+v", st)
	}
}

// Only offerDepth connections rotate: one caller doing requests one after
// another on a route with 16 idle connections uses at most offerDepth of
// them, and the others expire after MaxIdleTime as idle connections do (the
// bubble's fake clock, with the supervisor's expiry ticks).
func TestOffersRotateOnlyAFewConnectionsAndTheRestExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(t, 16, 16, func(cfg *SupervisorConfig) {
			cfg.Route.MaxIdleTime = time.Minute
			cfg.ExpiryInterval = time.Second
		})
		h := p.idleRoute("a", 16)
		used := map[uint64]bool{}
		for i := 0; i < 150; i++ { // one request a second for 150 s
			l, ok := p.take(h)
			if !ok {
				l = p.leased(p.ask(h))
			}
			used[l.ConnID] = true
			p.release(h, true, l)
			time.Sleep(time.Second)
			synctest.Wait()
		}
		if len(used) > offerDepth {
			t.Fatalf("%d connections used by one caller, want at most %d", len(used), offerDepth)
		}
		st := p.stats(h)
		if st.Open != len(used) || int(st.ClosedBy[string(route.ReasonIdleExpired)]) != 16-len(used) {
			t.Fatalf("%d used; open %d, closed %v", len(used), st.Open, st.ClosedBy)
		}
	})
}

// Closing idle connections takes the offers back first and closes each
// exactly once; an offer a caller took meanwhile is not closed under it, and
// goes back to serve when released.
func TestCloseIdleClosesEveryOfferOnceAndNoneTaken(t *testing.T) {
	p := newPool(t, 8, 8)
	h := p.idleRoute("a", 4)
	p.offers(h, 4)
	taken, _ := p.take(h)
	tk := &wait.Ticket[int]{}
	p.sys.Root.Send(h.PID, &CloseIdleRequest{Ticket: tk})
	if n, err := result(t, tk); err != nil || n != 3 {
		t.Fatalf("closed %d (%v), want the 3 offers left", n, err)
	}
	st := p.stats(h)
	if st.Open != 1 || st.Leased != 1 || st.Closed != 3 || st.ClosedBy[string(route.ReasonCloseIdle)] != 3 {
		t.Fatalf("after CloseIdle: %+v", st)
	}
	p.release(h, true, taken)
	if st := p.stats(h); st.Open != 1 || st.Idle != 1 || st.Closed != 3 {
		t.Fatalf("after the release: %+v", st)
	}
}

// LRU eviction with offers: under MaxConnsTotal, another route's need evicts
// the least recently used idle connection, whether on the idle list or on
// offer, and never one a caller took from the outbox, even the least
// recently used of all.
func TestEvictionClosesTheLeastRecentlyUsedIdleConnectionNeverATakenOne(t *testing.T) {
	p := newPool(t, 8, 6)
	a := p.route("a")
	ls := p.lease(a, 6)
	for _, l := range ls { // released one by one: ls[0] is the least recently used
		p.release(a, true, l)
		p.stats(a)
	}
	p.offers(a, 4) // offered as they became idle: ls[0] to ls[3]
	taken, _ := p.take(a)
	if taken.ConnID != ls[0].ConnID {
		t.Fatalf("took %d, want the first offered, %d", taken.ConnID, ls[0].ConnID)
	}
	b := p.route("b")
	got := p.leased(p.ask(b)) // needs a place: one of a's idle connections is evicted
	st := p.stats(a)
	if st.Open != 5 || st.ClosedBy[string(route.ReasonEvicted)] != 1 {
		t.Fatalf("route a after the eviction: %+v", st)
	}
	left := map[uint64]bool{taken.ConnID: true}
	for i := 0; i < 4; i++ {
		l, ok := p.take(a)
		if !ok {
			l = p.leased(p.ask(a))
		}
		left[l.ConnID] = true
	}
	if left[ls[1].ConnID] || len(left) != 5 {
		t.Fatalf("connections left %v: want all but %d, the least recently used one not taken", left, ls[1].ConnID)
	}
	p.release(b, true, got)
}

// An offer taken past its connection's due time is declined: the route
// closes the connection as due, and the caller leases another way.
func TestAnOfferTakenPastItsDueTimeIsDeclinedAndClosed(t *testing.T) {
	p := newPool(t, 2, 8, func(cfg *SupervisorConfig) { cfg.Route.MaxIdleTime = time.Minute })
	h := p.idleRoute("a", 1)
	p.offers(h, 1)
	if _, ok := h.take(time.Now().Add(2 * time.Minute)); ok {
		t.Fatal("an offer past its due time was taken")
	}
	p.offers(h, 0)
	st := p.stats(h)
	if st.Open != 0 || st.ClosedBy[string(route.ReasonIdleExpired)] != 1 || st.Leases != 1 {
		t.Fatalf("after the decline: %+v", st)
	}
}

// giveBack returns l unused, as Exchange.GiveBack does: its request was
// given up before anything was written.
func (p *pool) giveBack(h *routeHandle, l Lease) {
	t := &wait.Ticket[Lease]{}
	t.Deliver(l)
	t.Cancel()
	p.sys.Root.Send(h.PID, &LeaseCancelled{Ticket: t})
}

// An offer given back unused counts as no lease, whether or not the route
// had learned it was taken: here a caller who queues makes the route take
// the outbox back and count both offers taken, then one comes back untouched
// and goes to that caller. Leases, Reuses and Offered count the caller's
// lease and the offer that was used, and nothing for the one given back.
func TestAnOfferGivenBackUnusedCountsNoLease(t *testing.T) {
	p := newPool(t, 2, 8)
	h := p.idleRoute("a", 2)
	p.offers(h, 2)
	before := p.stats(h)
	a, _ := p.take(h)
	b, _ := p.take(h)
	w := p.ask(h) // both taken: the route learns it as w queues
	if !p.waiting(h, w) {
		t.Fatal("W was served with both connections taken")
	}
	p.giveBack(h, a)
	got := p.leased(w)
	if got.ConnID != a.ConnID {
		t.Fatalf("W got connection %d, want %d, given back", got.ConnID, a.ConnID)
	}
	p.release(h, true, got, b)
	st := p.stats(h)
	if st.Leases != before.Leases+2 || st.Reuses != before.Reuses+2 || st.Offered != before.Offered+1 {
		t.Fatalf("leases %d, reuses %d, offered %d; want %d, %d, %d", st.Leases, st.Reuses, st.Offered,
			before.Leases+2, before.Reuses+2, before.Offered+1)
	}
	if st.Open != 2 || st.Idle != 2 || st.Leased != 0 || st.Pending != 0 {
		t.Fatalf("after the releases: %+v", st)
	}
}

// A lease granted from the idle list and given back untouched (its caller
// gave up as it was delivered) is given back as an offer is: its
// connection goes back idle since it was last used, so that MaxIdleTime
// still counts from then (it reset to the give-back, and a connection idle
// 50 s lived another minute).
func TestALeaseGivenBackUntouchedKeepsItsIdleTime(t *testing.T) {
	clock := &frozenClock{}
	p := newPool(t, 1, 8, func(cfg *SupervisorConfig) { cfg.Route.MaxIdleTime, cfg.Route.Now = time.Minute, clock.now })
	h := p.idleRoute("a", 1) // idle since frozenAt
	clock.advance(50 * time.Second)
	l := p.leased(p.ask(h))
	if !l.Reused || l.IdleTime != 50*time.Second {
		t.Fatalf("the lease %+v, want the idle connection, idle 50s", l)
	}
	p.giveBack(h, l)
	if st := p.stats(h); st.Idle != 1 || st.Open != 1 {
		t.Fatalf("after the give-back: %d idle of %d open, want the one idle", st.Idle, st.Open)
	}
	clock.advance(11 * time.Second) // 61 s after its last use
	p.sys.Root.Send(h.PID, &ExpiryTicked{Now: clock.now()})
	if st := p.stats(h); st.Open != 0 || st.ClosedBy[string(route.ReasonIdleExpired)] != 1 {
		t.Fatalf("61 s after its last use: open %d, closed by %v; want it closed as idle too long", st.Open, st.ClosedBy)
	}
}

// A connection whose server closed it while a caller held it, reported by
// its idle watch late, is closed when it comes back untouched: it never
// goes idle, nor on offer, again (it did, and the next taker's exchange
// failed as stale).
func TestAConnectionReportedClosedWhileLeasedIsClosedWhenGivenBack(t *testing.T) {
	p := newPool(t, 1, 8)
	h := p.idleRoute("a", 1)
	l := p.leased(p.ask(h))
	p.sys.Root.Send(h.PID, &conn.IdleBroken{ID: l.ConnID, Err: io.EOF})
	p.giveBack(h, l)
	if st := p.stats(h); st.Open != 0 || st.ClosedBy[string(route.ReasonServerClosed)] != 1 || len(h.outbox) != 0 {
		t.Fatalf("given back after its server closed it: open %d, closed by %v, %d offers; want it closed as server_closed",
			st.Open, st.ClosedBy, len(h.outbox))
	}
}

// An offer declined after the route learned it was taken counts as no lease
// either: a caller took the offer (received it from the outbox) and was slow
// to look at it; meanwhile W queued, which made the route count it taken;
// the caller then finds it past its due time and declines it. The route
// closes it as idle too long and dials for W.
func TestAnOfferDeclinedAfterTheRouteCountedItCountsNoLease(t *testing.T) {
	p := newPool(t, 1, 8, func(cfg *SupervisorConfig) { cfg.Route.MaxIdleTime = time.Minute })
	h := p.idleRoute("a", 1)
	p.offers(h, 1)
	before := p.stats(h)
	o := <-h.outbox // taken, not yet looked at
	w := p.ask(h)
	if !p.waiting(h, w) {
		t.Fatal("W was served with the only connection taken")
	}
	p.sys.Root.Send(h.PID, &OfferDeclined{ConnID: o.conn.id, At: time.Now().Add(2 * time.Minute)})
	got := p.leased(w)
	if got.ConnID == o.conn.id || got.Reused {
		t.Fatalf("W got %+v, want a new connection", got)
	}
	p.release(h, true, got)
	st := p.stats(h)
	if st.Leases != before.Leases+1 || st.Reuses != before.Reuses || st.Offered != before.Offered ||
		st.ClosedBy[string(route.ReasonIdleExpired)] != 1 {
		t.Fatalf("leases %d, reuses %d, offered %d, closed %v; want %d, %d, %d and one idle_expired", st.Leases, st.Reuses,
			st.Offered, st.ClosedBy, before.Leases+1, before.Reuses, before.Offered)
	}
}
