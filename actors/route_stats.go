package actors

import "time"

// publish stores the counters readers outside the actor use (RoutePublished).
func (r *Route) publish() {
	p := r.pub
	p.Idle.Store(int32(len(r.idle)))
	p.Pending.Store(int32(r.waiters.Len()))
	p.Leased.Store(int32(len(r.conns) - len(r.idle) - r.dialing))
	if len(r.idle) > 0 {
		p.LRUIdleSince.Store(r.idle[0].idleSince.UnixNano())
	} else {
		p.LRUIdleSince.Store(0)
	}
	p.FailFast.Store(r.breaker.state == breakerOpen)
	p.LearnedIdle.Store(int64(r.learner.closedAt))
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
		oldestAge = r.cfg.Now().Sub(oldest)
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
		LearnedIdle: r.learner.learned(r.cfg.Now()), Streams: r.streams(),
		ClosedBy: by, OldestLease: oldestAge,
		RecentCloses: r.recentCloses.list(), RecentWaits: r.recentWaits.list(),
	}
}
