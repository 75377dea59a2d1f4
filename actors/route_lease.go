package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
)

// The lease and the release on a route: a LeaseRequest served at once (a
// free stream, an idle connection, what is still on offer) or queued in the
// FIFO; a Released that hands the connection to the next waiter, or to the
// idle list, or closes it. The outbox's side of both is route_outbox.go.

func (r *Route) onLease(ctx actor.Context, m *LeaseRequest) {
	if r.closed {
		m.Ticket.Reject(ErrRouteClosed)
		return
	}
	if m.Ticket.Done() {
		return // gave up before we got to it; its LeaseCancelled follows
	}
	if m.Hedge != nil {
		r.onHedgeLease(ctx, m) // served at once, or after a dial it makes room for, or refused
		return
	}
	if r.leaseNow(ctx, m) {
		return
	}
	if err := r.admit(); err != nil {
		m.Ticket.Reject(err)
		return
	}
	r.enqueue(ctx, m)
}

// admit decides whether a caller that cannot be leased a connection at once
// may wait for one: nil, or the error it is refused with. This is where the
// route's limits on waiting are decided, and where an adaptive limit would
// decide too. A caller that would wait for a dial fails at once while dials
// keep failing (connections the route still has serve as usual); one more
// than MaxPendingPerRoute is refused.
func (r *Route) admit() error {
	if !r.breaker.allow(r.clock()) {
		r.tel.LeaseRejected("route_unavailable")
		return ErrRouteUnavailable
	}
	if max := r.cfg.MaxPendingPerRoute; max > 0 && r.waiters.Len() >= max {
		r.queueFull++
		r.tel.LeaseRejected("queue_full")
		return ErrQueueFull
	}
	return nil
}

// enqueue puts m at the tail of the FIFO. Waiters leave it served in arrival
// order (nextWaiter), or when they give up (onLeaseCancelled), or when the
// route fails them (dialFailed, onStopping).
func (r *Route) enqueue(ctx actor.Context, m *LeaseRequest) {
	r.takeBack() // no caller queues while an offer waits in the outbox
	r.waiters.Push(m.Ticket, waiter{req: m, queuedAt: queuedAt{at: r.clock(), pos: r.waiters.Len() + 1}})
	if m.Fresh {
		r.freshWaiters++
	}
	r.armLongWait(ctx)
}

// nextWaiter takes the oldest waiter that can take a connection (can) out
// of the FIFO, with when and where it had queued: the one place waiters are
// served from, in arrival order.
func (r *Route) nextWaiter(can func(waiter) bool) (*LeaseRequest, queuedAt, bool) {
	_, w, ok := r.waiters.TakeFirst(can)
	if !ok {
		return nil, queuedAt{}, false
	}
	return w.req, r.dequeued(w), true
}

// leaseNow grants m a free stream or an idle connection, and reports
// whether it did. One goes to m only if nobody who can take it queued
// earlier: for a stream, a waiter that does not avoid its connection (one
// that avoids it, a replay, waits for another connection, and m does not
// queue behind it); for an idle connection, a waiter that is not fresh
// (fresh waiters cannot take a re-used connection). A fresh caller takes
// neither.
func (r *Route) leaseNow(ctx actor.Context, m *LeaseRequest) bool {
	if m.Fresh {
		return false
	}
	if !r.hasRoom() {
		r.takeBack() // an offer nobody took is no request in flight
		if !r.hasRoom() {
			return false // the limit holds: m waits its turn
		}
	}
	cs := r.freeNow(ctx, m)
	if cs == nil && len(r.out.offered) > 0 {
		r.takeBack() // what is still on offer serves m rather than a later caller
		cs = r.freeNow(ctx, m)
	}
	if cs == nil {
		return false
	}
	if !r.grant(m, cs, queuedAt{}) && cs.phase != phaseIdle {
		r.available(ctx, cs, r.clock()) // cancelled meanwhile: back it goes (an idle one stays)
	}
	return true
}

// freeNow returns a connection m may be leased at once (see leaseNow), or
// nil: one with a free stream, or an idle one.
func (r *Route) freeNow(ctx actor.Context, m *LeaseRequest) *connState {
	cs := r.h2WithRoom(ctx, m.Avoid)
	if cs != nil && r.waiterFor(cs) {
		cs = nil
	}
	if cs == nil && r.waiters.Len() == r.freshWaiters {
		cs = r.popIdle(ctx)
	}
	return cs
}

// onLeaseCancelled drops a waiter that gave up, and takes back a connection
// delivered to it just before it gave up.
func (r *Route) onLeaseCancelled(ctx actor.Context, m *LeaseCancelled) {
	if w, ok := r.waiters.Remove(m.Ticket); ok {
		r.dequeued(w)
	}
	if m.TimedOut {
		r.leaseTimeouts++
	}
	if l, ok := m.Ticket.Returned(); ok {
		switch cs := r.conns[l.ConnID]; {
		case l.Offered:
			r.givenBack(ctx, cs, true) // taken from the outbox, given back untouched
		case cs == nil || cs.phase != phaseLeased:
		case cs.proto.exclusive():
			r.givenBack(ctx, cs, false) // granted, given back untouched
		default:
			// A stream given back untouched: the connection carries others,
			// or goes idle as a released one does.
			cs.proto.ungrant(cs)
			r.available(ctx, cs, r.clock())
		}
	}
}

// dequeued accounts for a waiter that left the queue and returns when and where
// it had queued.
func (r *Route) dequeued(w waiter) queuedAt {
	if w.req.Fresh {
		r.freshWaiters--
	}
	r.waitEnded(w)
	return w.queuedAt
}

func (r *Route) onReleased(ctx actor.Context, m *Released) {
	r.hedgeReleased(m)
	cs := r.conns[m.ConnID]
	if cs == nil {
		return // closed meanwhile (client close)
	}
	if cs.phase == phaseOffered {
		r.heard(cs) // taken from the outbox: its lease is counted now
	}
	if cs.phase != phaseLeased {
		return
	}
	r.recordOutcome(cs, m)
	r.exchangeOutcome(ctx, cs, m) // the outlier rule (route_outlier.go)
	cs.proto.released(ctx, r, cs, m)
}

// recordOutcome records what an exchange on cs says of its connection and
// its server: one more request served, and, for a connection that turned
// out closed by the server when it was leased (Stale), the idle time the
// server closed it within (idleLearner). Per-connection and per-endpoint
// outcomes are recorded here.
func (r *Route) recordOutcome(cs *connState, m *Released) {
	cs.served++
	r.exchangeSampled(m)
	if m.Stale {
		r.learner.serverClosed(cs.lastIdle, r.clock())
	}
}

// available hands a connection that just came free (released, given back
// or dialed) to the oldest waiter that can take it, or makes it idle (see its
// protocol's available), or closes it when it must retire (retireReason).
// A connection that still carries streams is never closed here: it drains.
func (r *Route) available(ctx actor.Context, cs *connState, now time.Time) {
	if cs.streams() == 0 {
		if reason := r.retireReason(cs, false, now); reason != "" {
			r.closeConn(ctx, cs, reason)
			return
		}
	}
	cs.proto.available(ctx, r, cs, now)
}

// idleOrClose puts a connection that nobody needs on the idle list (least
// recently used first) and reports true, or closes it when closeIt (room is
// wanted).
func (r *Route) idleOrClose(ctx actor.Context, cs *connState, now time.Time, closeIt bool) bool {
	if closeIt {
		r.closeConn(ctx, cs, route.ReasonEvicted)
		return false
	}
	r.toIdle(cs, now)
	return true
}

// wentIdle is the one message, never changed, that tells a connection it is idle.
var wentIdle = &conn.WatchIdle{}

// grant delivers cs to the waiter's ticket and leases it (toLeased). It
// reports false, changing nothing, when the waiter has given up: the caller
// keeps cs.
func (r *Route) grant(w *LeaseRequest, cs *connState, q queuedAt) bool {
	now := r.clock()
	idleFor, waited := cs.idleFor(now), time.Duration(0)
	if q.pos > 0 {
		waited = now.Sub(q.at)
	}
	terms := Lease{Reused: cs.served > 0, IdleTime: idleFor, Waited: waited, QueuePos: q.pos, Dial: cs.dial}
	if r.ov.lim != nil {
		terms.InFlight = r.inFlight() + 1 - r.countedInFlight(cs) // with this one
	}
	if !w.Ticket.Deliver(cs.lease(terms)) {
		return false
	}
	if r.cfg.Fault != nil {
		r.cfg.Fault("granted", w)
	}
	if q.pos > 0 {
		r.recentWaits.add(route.Wait{At: now, Waited: waited, QueuePos: q.pos})
	}
	cs.proto.granted(cs)
	r.toLeased(cs, now, false)
	r.streamGranted(cs)
	return true
}

// popIdle takes the most recently used idle HTTP/1.1 connection that is
// still good, closing the ones due for retirement it meets. Idle HTTP/2
// connections are h2WithRoom's: leased as streams, to callers that do not
// avoid them.
func (r *Route) popIdle(ctx actor.Context) *connState {
	now := r.clock()
	for i := len(r.idle) - 1; i >= 0; i-- { // closing r.idle[i] leaves r.idle[:i] as it was
		cs := r.idle[i]
		if !cs.proto.exclusive() || r.closeIfDue(ctx, cs, now) {
			continue
		}
		return cs
	}
	return nil
}
