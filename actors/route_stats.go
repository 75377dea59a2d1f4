package actors

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/connactor/connactor/route"
)

// publish stores the counters readers outside the actor use (routePublished).
// It runs after every message, and stores only what changed: the route is
// the single writer, so a load tells what is there, and a store is a full
// barrier on the cache line the supervisor and the gauges read, while a
// message usually changes one or two counters.
func (r *Route) publish() {
	p := r.pub
	idle := len(r.idle) + r.out.idle() // what is still on offer is idle
	set32(&p.Idle, int32(idle))
	set32(&p.Pending, int32(r.waiters.Len()))
	set32(&p.Leased, int32(len(r.conns)-idle-r.dialing))
	lru := r.out.lru
	if len(r.idle) > 0 {
		if since := r.idle[0].idleSince.UnixNano(); lru == 0 || since < lru {
			lru = since
		}
	}
	set64(&p.LRUIdleSince, lru)
	if open := r.breaker.state == breakerOpen; p.FailFast.Load() != open {
		p.FailFast.Store(open)
	}
	var learned time.Duration
	if r.learner.closedAt != 0 { // the clock is read only when something was learned
		learned = r.learner.learned(r.clock())
	}
	set64(&p.LearnedIdle, int64(learned))
	var spare int32 // only spares an expiry tick may stop (expireSpares) bring ticks
	if len(r.conns) == 0 && r.cfg.MaxIdleTime > 0 {
		spare = int32(len(r.spares.pids))
	}
	set32(&p.Spare, spare)
	r.publishUnused(idle)
	r.publishEndpoints()
	set32(&p.Limit, int32(min(r.limitNow(), math.MaxInt32)))
}

// set32 and set64 store v into a when it holds another value. They are
// plain functions, not one generic one: the compiler inlines them (a generic
// version is compiled once for every pointer type, not inlined, and calls
// Load and Store through its dictionary).
func set32(a *atomic.Int32, v int32) {
	if a.Load() != v {
		a.Store(v)
	}
}

func set64(a *atomic.Int64, v int64) {
	if a.Load() != v {
		a.Store(v)
	}
}

func (r *Route) stats() routeReport {
	by := make(map[string]uint64, len(r.closedBy))
	for k, v := range r.closedBy {
		by[k] = v
	}
	// The oldest unreleased lease: a response nobody reads or closes holds its
	// connection, and shows here (a scan of at most MaxConnsPerRoute entries).
	var oldest time.Time
	for _, cs := range r.conns {
		if cs.phase == phaseLeased && (oldest.IsZero() || cs.leasedAt.Before(oldest)) {
			oldest = cs.leasedAt
		}
	}
	var oldestAge time.Duration
	if !oldest.IsZero() {
		oldestAge = r.clock().Sub(oldest)
	}
	var failUntil time.Time
	if r.breaker.state == breakerOpen {
		failUntil = r.breaker.until
	}
	spare, recycling := len(r.spares.pids), len(r.spares.recycling)
	// An offer still in the outbox is idle; one taken and not yet released is
	// leased (Leases counts it once the route hears of it).
	idle := len(r.idle) + r.out.idle()
	return routeReport{spare: spare, recycling: recycling, Stats: route.Stats{FailFastUntil: failUntil,
		Route: r.name, Open: len(r.conns), Idle: idle, Dialing: r.dialing,
		Leased: len(r.conns) - idle - r.dialing, Pending: r.waiters.Len(),
		Max: r.cfg.MaxConnsPerRoute, Opened: r.opened, Closed: r.closedN,
		Leases: r.leases, Reuses: r.reuses, Offered: r.offeredN, DialFailures: r.dialFailures, LeaseTimeouts: r.leaseTimeouts,
		QueueFull: r.queueFull, FailFast: r.breaker.state.String(), FailedFast: r.breaker.rejected,
		LearnedIdle: r.learner.learned(r.clock()), Streams: r.streams(), SpareActors: spare + recycling,
		ClosedBy: by, OldestLease: oldestAge,
		RecentCloses: r.recentCloses.list(), RecentWaits: r.recentWaits.list(),
		Endpoints: r.endpointStats(), ResolvedAt: r.eps.at, ResolveErr: r.eps.err,
		Hedges: r.hedge.sent, HedgeWins: r.hedge.wins, HedgeDelay: r.hedge.delay(r.pub),
		Limit: r.limitNow(), InFlight: r.inFlight() - r.out.idle(), NoLoad: r.noLoad(), Shed: r.ov.shedN,
	}}
}
