package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/actors/hedge"
)

// Hedged requests, the route's half (the caller's is pool_hedge.go). The
// route keeps what a hedge is decided on: its latency from each request's
// write to its response head (a hedge.Sketch, when the delay is the
// measured one), its hedge budget (hedged attempts over the last ten
// seconds against its requests in them) and its counts. A caller whose
// attempt has had no response head for the delay asks for a hedge with a
// LeaseRequest carrying a HedgeAsk; the route answers it at once, as it
// answers leases: a connection or stream, with room under its limits and
// within the budget; or a refusal (HedgeRefused) saying when to ask again,
// or never. A hedge never waits in the queue behind callers, and never
// waits for room: it waits only for a dial the route makes room for under
// MaxConnsPerRoute.

// routeHedge is the route's hedging state. Route state: touched only in
// Receive.
type routeHedge struct {
	policy *hedge.Policy // nil = no hedging
	sketch *hedge.Sketch // latency, write to head: a measured delay only (nil otherwise)
	budget hedge.Budget
	// sent counts hedged attempts written (Stats.Hedges), wins the requests
	// a hedge answered (Stats.HedgeWins).
	sent, wins uint64
	// fresh counts samples since the published delay was last computed, at
	// publishedAt.
	fresh       int
	publishedAt time.Time
}

// Publishing the measured delay: a quantile costs a pass over the sketch,
// so it is computed again every hedgeRepublish samples, or after
// hedgeRepublishAfter, not at every release.
const (
	hedgeRepublish      = 16
	hedgeRepublishAfter = 100 * time.Millisecond
)

// delay is how long a hedged request's first attempt waits now before a
// hedge is asked for (Stats.HedgeDelay): the policy's fixed Delay, or the
// measured one last published (0 until measured); 0 without hedging.
func (h *routeHedge) delay(pub *routePublished) time.Duration {
	switch {
	case !h.policy.On():
		return 0
	case h.policy.Delay > 0:
		return h.policy.Delay
	}
	return time.Duration(pub.HedgeDelay.Load())
}

// HedgeRefused answers a hedge's LeaseRequest the route does not serve:
// RetryAt is when the caller may ask again (the delay has not passed, or
// the route has no room or budget now), zero when it may not (the request
// made its attempts, or the route's latency is not known yet).
type HedgeRefused struct{ RetryAt time.Time }

func (e *HedgeRefused) Error() string { return "connactor: hedge refused" }

// hedgeNever is the refusal that asks for no retry (never changed).
var hedgeNever = &HedgeRefused{}

// onHedgeLease serves a hedge's LeaseRequest (m.Hedge set) at once, or
// refuses it (hedge.Decide says which). It serves it with an idle
// connection or a free stream, preferring one to another endpoint than the
// request's earlier attempts; or, with none but room under
// MaxConnsPerRoute, it queues it for the dial that room allows (nobody
// else waits then: a hedge never goes ahead of, or behind, waiting callers).
func (r *Route) onHedgeLease(ctx actor.Context, m *LeaseRequest) {
	h := &r.hedge
	if h.policy == nil {
		m.Ticket.Reject(hedgeNever)
		return
	}
	now := r.clock()
	delay, ok := h.policy.DelayAt(h.sketch, now)
	var cs *connState
	var dial bool
	room := func() bool { // looked for only once the hedge is due (it may take the outbox back)
		cs, dial = r.hedgeRoom(ctx, m.Hedge.Conns)
		return cs != nil || dial
	}
	v, at := hedge.Decide(*h.policy, delay, ok, m.Hedge.Attempts, now, room, &h.budget)
	switch {
	case v == hedge.Done:
		m.Ticket.Reject(hedgeNever)
	case v == hedge.Wait:
		m.Ticket.Reject(&HedgeRefused{RetryAt: at})
	case cs != nil:
		if !r.grant(m, cs, queuedAt{}) && cs.phase != phaseIdle {
			r.available(ctx, cs, now) // cancelled meanwhile: back it goes
		}
	default:
		r.enqueue(ctx, m) // wantConns asks for the permit of its dial
	}
}

// hedgeRoom returns a connection a hedge may be leased at once (see
// hedgeConn), or reports whether the route may dial one for it: nobody
// waits, and the route holds fewer than MaxConnsPerRoute connections and
// permits. With callers waiting, or its requests in flight at its limit
// (hasRoom: the adaptive limit, when it has one), it has no room: a hedge
// into a queue is futile, and waiting callers come first.
func (r *Route) hedgeRoom(ctx actor.Context, avoid []uint64) (*connState, bool) {
	if r.closed || r.waiters.Len() > 0 || !r.hasRoom() {
		return nil, false
	}
	cs := r.hedgeConn(ctx, avoid)
	if cs == nil && len(r.out.offered) > 0 {
		r.takeBack() // what is still on offer is idle, and may serve the hedge
		cs = r.hedgeConn(ctx, avoid)
	}
	if cs != nil {
		return cs, false
	}
	dial := !r.shed && !r.eps.awaiting() && r.breaker.state != breakerOpen &&
		len(r.conns)+r.permitsPending < r.cfg.MaxConnsPerRoute
	return nil, dial
}

// hedgeConn returns an idle HTTP/1.1 connection (the most recently used)
// or the HTTP/2 connection with the most free streams: one to an endpoint
// none of avoid's goes to when there is one, or else another connection
// than avoid's, or else (HTTP/2) another stream of one of avoid's. nil when
// there is none.
func (r *Route) hedgeConn(ctx actor.Context, avoid []uint64) *connState {
	now := r.clock()
	avoided := func(cs *connState) (conn, ep bool) {
		for _, id := range avoid {
			if cs.id == id {
				return true, true
			}
			if o := r.conns[id]; o != nil && o.ep != nil && o.ep == cs.ep {
				ep = true
			}
		}
		return false, ep
	}
	if r.dialProto == protoH2 {
		// Ranked: another endpoint (2), another connection (1), another
		// stream of the same connection (0); then by free streams.
		var pick *connState
		pickRank, pickRoom := -1, 0
		for _, h := range r.h2 {
			cs := h.cs
			if cs.phase == phaseIdle && r.closeIfDue(ctx, cs, now) {
				continue
			}
			room := r.h2Room(h, now)
			if room <= 0 {
				continue
			}
			rank := 2
			if c, ep := avoided(cs); c {
				rank = 0
			} else if ep {
				rank = 1
			}
			if rank > pickRank || rank == pickRank && room > pickRoom {
				pick, pickRank, pickRoom = cs, rank, room
			}
		}
		return pick
	}
	var best, other *connState
	for i := len(r.idle) - 1; i >= 0 && best == nil; i-- { // closing r.idle[i] leaves r.idle[:i] as it was
		cs := r.idle[i]
		if !cs.proto.exclusive() || r.closeIfDue(ctx, cs, now) {
			continue
		}
		if _, ep := avoided(cs); !ep {
			best = cs
		} else if other == nil {
			other = cs
		}
	}
	if best != nil {
		return best
	}
	return other
}

// hedgeReleased records what a Released tells the route's hedging: a hedged
// attempt written (Stats.Hedges), or one more of the route's requests (the
// budget's measure); and the latency sample, from which the published delay
// is computed again now and then.
func (r *Route) hedgeReleased(m *Released) {
	h := &r.hedge
	if h.policy == nil {
		return
	}
	now := r.clock()
	switch {
	case !m.Hedge:
		h.budget.Request(now)
	case !m.Unsent:
		h.sent++
	}
	lat, ok := m.latency()
	if !ok || h.sketch == nil {
		return
	}
	h.sketch.Add(now, lat)
	h.fresh++
	if h.fresh < hedgeRepublish && now.Sub(h.publishedAt) < hedgeRepublishAfter {
		return
	}
	h.fresh, h.publishedAt = 0, now
	d, ok := h.sketch.Quantile(now, h.policy.Percentile)
	if !ok {
		d = 0
	}
	set64(&r.pub.HedgeDelay, int64(d))
}
