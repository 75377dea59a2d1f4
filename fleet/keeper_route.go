package fleet

import "time"

// params are the keeper's fixed settings that a route's state needs.
type params struct {
	budget      int
	block       int
	callTimeout time.Duration
	idleRelease time.Duration
	minGap      time.Duration // least time between two calls for one route
	maxInFlight int           // calls of one route still running (abandoned ones included)
}

// routeShare is the keeper's state for one route: the demand the supervisor
// reported, the lease the grain granted, and the call in flight. It is a plain
// value, touched only inside the keeper's Receive, and takes the time as an
// argument so that tests can drive it.
type routeShare struct {
	route string

	// Demand, from the last actors.UsageReported.
	held, idle, waiting int
	lastUsed            time.Time
	// peak is the highest want seen since the latest call began: a call
	// reports it, so that a busy node renewing at a quiet instant does not
	// lose its share.
	peak int

	// The lease, from the last applied ShareResponse.
	grant      int
	budget     int           // as the grain divides it (0 until it answered)
	lease      time.Duration // as the grain grants it
	leaseUntil time.Time     // node-side expiry, a margin before the grain's
	nodes      int
	safe       bool // the last answer came from a grain in safe mode

	// Calls. Only the answer to the latest call (seq) is applied: an older
	// one may have been overtaken at the grain (see ledger.apply), so applying
	// it could make the node use more than the grain counts.
	seq       uint64
	inFlight  bool // the latest call has neither ended nor been abandoned
	running   int  // calls whose goroutine has not ended (abandoned ones too)
	sentAt    time.Time
	sentHas   int // what the latest call reported: the grain counts at least
	sentHeld  int // max(grant, sentHas, sentHeld) for this node until the next
	failed    bool
	streak    int       // failures in a row, for the back-off
	next      time.Time // earliest time to ask for more (retry-after, back-off)
	nudged    bool      // the grain asked for a call now
	eagerTill time.Time // after a nudge, give back as soon as possible

	// Telemetry.
	lastTook          time.Duration
	renewed, failures int

	// What the supervisor was last told (actors.ShareChanged); 0 before anything.
	told int
	// released: the keeper is stopping and gives the share back; the route
	// wants and has nothing from now on.
	released bool
}

func newRouteShare(route string, now time.Time) *routeShare {
	return &routeShare{route: route, lastUsed: now, lease: DefaultLease}
}

// usage records a actors.UsageReported.
func (r *routeShare) usage(now time.Time, held, idle, waiting int) {
	r.held, r.idle, r.waiting = max(held, 0), min(max(idle, 0), max(held, 0)), max(waiting, 0)
	if r.held-r.idle+r.waiting > 0 {
		r.lastUsed = now
	}
}

// want is the share to ask for: the connections in use plus the callers
// waiting, plus headroom, rounded up to whole blocks, so that a busy node asks
// now and then for a block rather than for every connection. A route idle for
// idleRelease wants nothing (it gives its share back); until then one block.
func (r *routeShare) want(now time.Time, p *params) int {
	if r.released {
		return 0
	}
	used := r.held - r.idle + r.waiting
	if used <= 0 {
		if now.Sub(r.lastUsed) < p.idleRelease {
			return min(p.block, p.budget)
		}
		return 0
	}
	return min(p.budget, (used/p.block+1)*p.block)
}

// has is the grant the node enforces at now: 0 once the lease has expired.
func (r *routeShare) has(now time.Time) int {
	if !r.released && now.Before(r.leaseUntil) {
		return r.grant
	}
	return 0
}

// share is what the node may hold at now: its grant while the lease holds;
// after that, the floor while its calls fail (the grain cannot be reached),
// and 0 otherwise (the first call is still out, or the route went idle and
// stopped renewing).
func (r *routeShare) share(now time.Time, floor int) (share int, onFloor bool) {
	switch {
	case now.Before(r.leaseUntil):
		return r.grant, false
	case r.failed:
		return floor, true
	}
	return 0, false
}

// grainCounts is what the grain counts for this node since the latest call.
func (r *routeShare) grainCounts() int { return max(r.grant, r.sentHas, r.sentHeld) }

// observe folds the want at now into the peak; the keeper calls it on every
// event of the route.
func (r *routeShare) observe(now time.Time, p *params) {
	r.peak = max(r.peak, r.want(now, p))
}

// due says whether a call should start at now.
func (r *routeShare) due(now time.Time, p *params) bool {
	r.observe(now, p)
	if r.inFlight || r.running >= p.maxInFlight {
		return false
	}
	want := r.peak
	if r.seq == 0 {
		return want > 0
	}
	has := r.has(now)
	active := want > 0 || r.held > 0 || has > 0 || r.grainCounts() > 0
	switch {
	case !active:
		return false // the grain counts nothing for us and we want nothing
	case r.nudged:
		return true // the grain rate-limits its nudges
	case now.Sub(r.sentAt) < p.minGap:
		return false
	case r.failed:
		return !now.Before(r.next)
	case now.Sub(r.sentAt) >= r.lease/3:
		return true // renewal
	case want > r.grant && !now.Before(r.next):
		return true // more
	}
	// Give back, at once when the grain asked for it lately (eager), else
	// once the state has lasted a while: the grain counts more for us than
	// we commit (a shrink to confirm, connections closed since), or we have
	// had a block or more of our grant to spare since the latest call.
	gap := r.lease / 6
	if now.Before(r.eagerTill) {
		gap = p.minGap
	}
	spare := r.grainCounts() > max(has, r.held) || want+p.block <= r.grant
	return spare && now.Sub(r.sentAt) >= gap
}

// begin starts a call at now and returns its request; floor is the floor
// share the keeper would enforce for a route on its floor.
func (r *routeShare) begin(now time.Time, p *params, node nodeID, floor int) shareRequest {
	r.seq++
	r.inFlight = true
	r.running++
	r.sentAt = now
	r.nudged = false
	req := shareRequest{
		Route:  r.route,
		Node:   node,
		Seq:    r.seq,
		Budget: p.budget,
		Has:    r.has(now),
		Held:   r.held,
		Want:   max(r.peak, r.want(now, p)),
	}
	if share, onFloor := r.share(now, floor); onFloor && !r.released {
		req.Floor = share
	}
	if r.released {
		req.Want = 0
	}
	r.sentHas, r.sentHeld = req.Has, req.Held
	r.peak = r.want(now, p)
	return req
}

// abandon gives up on the call in flight once its deadline has passed; its
// goroutine still runs (and counts in running) until the cluster answers. It
// returns whether it gave up.
func (r *routeShare) abandon(now time.Time, p *params) bool {
	if !r.inFlight || now.Sub(r.sentAt) < p.callTimeout {
		return false
	}
	r.inFlight = false
	r.fail(now)
	return true
}

func (r *routeShare) fail(now time.Time) {
	r.failed = true
	r.streak++
	r.failures++
	backoff := min(100*time.Millisecond<<min(r.streak-1, 5), r.lease/3)
	r.next = now.Add(backoff)
}

// ended records the end of call seq (started at sentAt) at now. Only the
// latest call's answer is applied: the grain has recorded that call as this
// node's latest, so its grant is what the grain counts. An answer that comes after its call was abandoned is applied too (no
// newer call was sent, or it would not be the latest); its lease is counted
// from sentAt like any other.
func (r *routeShare) ended(now time.Time, seq uint64, resp shareResponse, err error) {
	r.running--
	if seq != r.seq {
		return
	}
	wasInFlight := r.inFlight
	r.inFlight = false
	if err != nil {
		if wasInFlight {
			r.fail(now) // an abandoned call already counted as failed
		}
		return
	}
	if resp.Stale {
		return // cannot happen for the latest call; keep what we have
	}
	r.failed, r.streak = false, 0
	r.renewed++
	r.lastTook = now.Sub(r.sentAt)
	r.grant, r.budget, r.nodes = resp.Grant, resp.Budget, resp.Nodes
	r.safe = resp.Safe > 0
	if resp.Lease > 0 {
		r.lease = resp.Lease
	}
	// The grain counts the lease from when it got the request, which is after
	// sentAt; a tenth of the lease more covers the keeper's tick and clocks
	// that run at slightly different speeds.
	r.leaseUntil = r.sentAt.Add(r.lease - r.lease/10)
	r.next = now.Add(max(resp.RetryAfter, 0))
}

// nudge records a RenewNow from the grain.
func (r *routeShare) nudge(now time.Time) {
	r.nudged = true
	r.eagerTill = now.Add(r.lease / 3)
}

// forgettable says whether the keeper can drop the route: nothing held, used
// or wanted, no lease, no call running, and nothing the grain still counts
// for this node (or its count has expired there).
func (r *routeShare) forgettable(now time.Time, p *params) bool {
	return r.running == 0 && r.held == 0 && r.waiting == 0 && r.want(now, p) == 0 &&
		r.has(now) == 0 && (r.grainCounts() == 0 || now.Sub(r.sentAt) >= r.lease)
}
