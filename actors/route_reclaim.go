package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Routes used once (a crawler's, a webhook sender's) would otherwise live as
// long as the client: an actor, its maps and the supervisor's and the pool's
// records of it, for every host ever called. A route whose callers have left
// it alone for MaxIdleTime (nothing leased, dialed, waited for or asked of
// the supervisor) reclaims itself on the expiry tick that finds it with no
// connection (reclaimIfUnused): usually the tick that closes its last idle
// connection, idle for MaxIdleTime. It refuses every lease from then on and
// tells the supervisor (RouteReclaimed), which starts the next RouteRequest
// for its key as a new route and stops it; once it has stopped, the pool
// drops its handle (SupervisorConfig.RouteStopped).
//
// A caller that held the route's handle from before may still send it a
// LeaseRequest. The route decides that race, in its Receive: a lease it
// handles before it reclaims itself is served (and the route is in use
// again), and every lease after is refused, or never answered once the route
// has stopped. The caller, whose lease was refused (ErrRouteClosed) or whose
// route's Done closed, finds the route's Reclaimed flag set and asks the
// supervisor for the route again (Call.leaseOnRoute): the request does not
// fail. The supervisor has seen RouteReclaimed before that RouteRequest (the
// route sent it before it refused the lease), so the request goes to a new
// route.

// publishUnused keeps unusedSince and its published copy (UnusedSince),
// given the route's idle connections (those still on offer in its outbox
// included: one a caller took is leased): the clock is read only when the
// route stops being used.
func (r *Route) publishUnused(idle int) {
	unused := len(r.conns) == idle && r.waiters.Len() == 0 && r.permitsPending == 0
	switch {
	case unused && r.unusedSince.IsZero():
		r.unusedSince = r.clock()
		r.pub.UnusedSince.Store(r.unusedSince.UnixNano())
	case !unused && !r.unusedSince.IsZero():
		r.unusedSince = time.Time{}
		r.pub.UnusedSince.Store(0)
	}
}

// reclaimIfUnused reclaims the route when it has no connection and has been
// unused for MaxIdleTime (never without MaxIdleTime), unless its fail-fast
// breaker is open: the cool-down protects the upstream, and a new route would
// not know it. Its spare connection actors stop with it.
func (r *Route) reclaimIfUnused(ctx actor.Context, now time.Time) {
	if r.closed || len(r.conns) > 0 || r.unusedSince.IsZero() || r.cfg.MaxIdleTime <= 0 ||
		now.Sub(r.unusedSince) < r.cfg.MaxIdleTime || r.breaker.state == breakerOpen && now.Before(r.breaker.until) {
		return
	}
	r.closed = true // every lease from now on is refused (onLease)
	r.pub.Reclaimed.Store(true)
	r.stopLongWait()
	r.tel.Forget()
	ctx.Send(r.sup, &RouteReclaimed{From: r.self})
}
