package actors

import "time"

// publish stores the counters readers outside the actor use (RoutePublished).
// It runs after every message, and stores only what changed: the route is
// the single writer, so a load tells what is there, and a store is a full
// barrier on the cache line the supervisor and the gauges read, while a
// message usually changes one or two counters.
func (r *Route) publish() {
	p := r.pub
	storeIfChanged(&p.Idle, int32(len(r.idle)))
	storeIfChanged(&p.Pending, int32(r.waiters.Len()))
	storeIfChanged(&p.Leased, int32(len(r.conns)-len(r.idle)-r.dialing))
	var lru int64
	if len(r.idle) > 0 {
		lru = r.idle[0].idleSince.UnixNano()
	}
	storeIfChanged(&p.LRUIdleSince, lru)
	if open := r.breaker.state == breakerOpen; p.FailFast.Load() != open {
		p.FailFast.Store(open)
	}
	storeIfChanged(&p.LearnedIdle, int64(r.learner.closedAt))
	storeIfChanged(&p.Spare, int32(len(r.spares.pids)))
}

// storeIfChanged stores v into a when it holds another value.
func storeIfChanged[T int32 | int64, A interface {
	Load() T
	Store(T)
}](a A, v T) {
	if a.Load() != v {
		a.Store(v)
	}
}

func (r *Route) stats() RouteStatsResponse {
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
	return RouteStatsResponse{FailFastUntil: failUntil,
		Route: r.name, Open: len(r.conns), Idle: len(r.idle), Dialing: r.dialing,
		Leased: len(r.conns) - len(r.idle) - r.dialing, Pending: r.waiters.Len(),
		Max: r.cfg.MaxConnsPerRoute, Opened: r.opened, Closed: r.closedN,
		Leases: r.leases, Reuses: r.reuses, DialFailures: r.dialFailures, LeaseTimeouts: r.leaseTimeouts,
		QueueFull: r.queueFull, FailFast: r.breaker.state.String(), FailedFast: r.breaker.rejected,
		LearnedIdle: r.learner.learned(r.clock()), Streams: r.streams(),
		Spare: len(r.spares.pids), Recycling: len(r.spares.recycling),
		ClosedBy: by, OldestLease: oldestAge,
		RecentCloses: r.recentCloses.list(), RecentWaits: r.recentWaits.list(),
	}
}
