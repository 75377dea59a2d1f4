package actors

import "time"

// published is a plain copy of the values of RoutePublished; set is false
// until the first publish, which stores every value (a restarted route actor
// starts from zero, while its RoutePublished holds its predecessor's values).
type published struct {
	set                   bool
	idle, pending, leased int32
	lruIdleSince          int64
	learnedIdle           int64
	failFast              bool
}

// publish stores the counters readers outside the actor use (RoutePublished).
// It runs after every message, and stores only what changed since the last
// time: an atomic store is a full barrier on the cache line the supervisor
// and the gauges read, and a message usually changes one or two counters.
func (r *Route) publish() {
	now := published{
		set:         true,
		idle:        int32(len(r.idle)),
		pending:     int32(r.waiters.Len()),
		leased:      int32(len(r.conns) - len(r.idle) - r.dialing),
		failFast:    r.breaker.state == breakerOpen,
		learnedIdle: int64(r.learner.closedAt),
	}
	if len(r.idle) > 0 {
		now.lruIdleSince = r.idle[0].idleSince.UnixNano()
	}
	was, p := r.shadow, r.pub
	if !was.set {
		was = published{idle: -1, pending: -1, leased: -1, lruIdleSince: -1, learnedIdle: -1, failFast: !now.failFast}
	}
	if now.idle != was.idle {
		p.Idle.Store(now.idle)
	}
	if now.pending != was.pending {
		p.Pending.Store(now.pending)
	}
	if now.leased != was.leased {
		p.Leased.Store(now.leased)
	}
	if now.lruIdleSince != was.lruIdleSince {
		p.LRUIdleSince.Store(now.lruIdleSince)
	}
	if now.failFast != was.failFast {
		p.FailFast.Store(now.failFast)
	}
	if now.learnedIdle != was.learnedIdle {
		p.LearnedIdle.Store(now.learnedIdle)
	}
	r.shadow = now
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
		ClosedBy: by, OldestLease: oldestAge,
		RecentCloses: r.recentCloses.list(), RecentWaits: r.recentWaits.list(),
	}
}
