package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/actors/outlier"
)

// OutlierPolicy is the outlier rule as a pool takes it (PoolConfig.Outlier):
// outlier.Policy, named here so that the pool's users configure it through
// this package alone.
type OutlierPolicy = outlier.Policy

// The outlier rule on a route (RouteConfig.Outlier, the rule in
// actors/outlier): each exchange's outcome, as its Released says
// (ExchangeFailed: a 5xx head, or an error after the lease), counts
// towards its endpoint's run of failures; a run of ConsecutiveFailures
// ejects the endpoint into the back-off its failed dials use
// (endpointSet.exchangesFailed: 1 s doubling to 30 s, jittered, shown in
// EjectedUntil). While it is held out (endpointSet.cutoff: no more than
// MaxEjectedPercent of the live endpoints at once, the least recently
// ejected serving past that share) it gets no new connection (pick), no
// new stream or request (retireReason: its connections retire as they come
// free, its idle ones close at once). Outcomes that arrive while it is
// ejected do not count: when it comes back its run starts from zero, and a
// first exchange that succeeds then ends the back-off's doubling.

// exchangeOutcome counts the outcome of an exchange on cs (m, its
// Released) for the outlier rule, and ejects cs's endpoint when the rule
// says so. Called when the route learns that a lease's exchange ended,
// before the connection is made available again: a connection to an
// endpoint ejected now retires there.
func (r *Route) exchangeOutcome(ctx actor.Context, cs *connState, m *Released) {
	p, e := r.cfg.Outlier, cs.ep
	if p == nil || e == nil {
		return
	}
	now := r.clock()
	ejected := e.ejected(now)
	if !m.ExchangeFailed && !ejected && r.eps.set.exchangeServed(e) {
		r.cfg.Logger.Info("connactor: an address a route ejected for failed exchanges serves again", "route", r.name, "addr", e.addr)
	}
	if !e.run.Record(*p, m.ExchangeFailed, ejected) {
		return
	}
	r.eps.set.exchangesFailed(e, now, r.rand())
	r.cfg.Logger.Warn("connactor: a route's exchanges with an address keep failing; it is left alone for a while",
		"route", r.name, "addr", e.addr, "failures", p.ConsecutiveFailures, "until", e.ejectedUntil.Sub(now).Round(time.Millisecond))
	r.takeBack()         // an idle connection to it on offer closes too
	r.onExpire(ctx, now) // its idle connections close (retireReason)
}

// heldForExchanges reports whether e is held out at now after its
// exchanges failed: its connections take no new request or stream and
// retire as they come free (retireReason). An endpoint whose dials failed
// keeps the connections it has.
func (r *Route) heldForExchanges(e *endpoint, now time.Time) bool {
	return e.ejectedBy == ejectedByExchanges && e.ejected(now) && e.held(r.eps.set.cutoff(now), now)
}
