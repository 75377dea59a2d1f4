package client

import (
	"sort"
	"time"

	"github.com/connactor/connactor/actors"
)

// Stats is a snapshot of the client's pool.
type Stats struct {
	// Open counts connections open or being dialed; Leased, those serving a
	// request (their body not yet read to its end or closed); Idle, those
	// waiting in the idle list; Pending, callers waiting for a connection.
	Open, Leased, Idle, Pending int          // totals across routes (see RouteStats)
	Streams                     int          // HTTP/2 streams in flight across routes
	Routes                      []RouteStats // every route, sorted by name

	MaxConnsTotal int // Config.MaxConnsTotal
	// Connections is the supervisor's own count of open and dialing connections
	// across routes: always <= MaxConnsTotal. Open (the sum over Routes) may
	// briefly differ, since routes are read one after the other: a connection
	// closed on one route and its place re-used on another can both show.
	Connections int
	// InFlight is the number of requests admitted under MaxConcurrentRequests:
	// those waiting for a connection (queued in a route) and those being
	// exchanged or whose response body is still open.
	InFlight         int
	PendingAdmission int    // requests waiting for admission under MaxConcurrentRequests
	PendingPermits   int    // routes' requests for room under MaxConnsTotal
	Evictions        uint64 // idle connections closed to make room for another route
	Expired          uint64 // idle connections closed by idle, keep-alive or lifetime expiry
	DialFailures     uint64 // dials that failed, all routes
	RouteFailures    uint64 // route actors that failed (panicked) and were replaced
	Retries          uint64 // replays on a new connection the retry budget allowed (0 when it is disabled)
	RetriesRefused   uint64 // replays the retry budget refused
	// OldestLease is the age of the oldest lease not yet released, across routes
	// (0 = none). A response whose body is never read to its end nor closed holds
	// its connection forever: it shows here, growing.
	OldestLease time.Duration
	// FleetMembers is the number of cluster members that run the budget
	// grain's kind, as this node sees them (0 without a fleet budget, or
	// until known): the default FleetFloor divides the budget by it.
	FleetMembers int
}

// RouteStats is one route's snapshot.
type RouteStats struct {
	Route string // e.g. "http://127.0.0.1:8080"; names proxy and identity when set
	// Open counts connections open or being dialed; Leased, those serving a
	// request (their body not yet read to its end or closed); Idle, those in
	// the idle list; Pending, callers waiting for a connection.
	Open, Leased, Idle, Pending int
	Max                         int // MaxConnsPerRoute
	// Streams is the number of HTTP/2 streams in flight on the route's
	// connections. An HTTP/2 connection is shared capacity: it counts once in
	// Open, and as Leased while it carries any stream.
	Streams int

	Dialing        int               // connections being dialed (counted in Open)
	Opened, Closed uint64            // connections opened and closed since the route started
	Leases, Reuses uint64            // leases granted, and of those on a re-used connection
	DialFailures   uint64            // dials that failed
	LeaseTimeouts  uint64            // callers that gave up after LeaseTimeout
	QueueFull      uint64            // callers refused with ErrQueueFull (MaxPendingPerRoute)
	FailFast       string            // "closed", "open" (calls fail with ErrRouteUnavailable) or "half_open" (a probe dial may go)
	FailFastUntil  time.Time         // while open: when the next probe may go
	FailedFast     uint64            // callers refused with ErrRouteUnavailable
	LearnedIdle    time.Duration     // the idle timeout the route learned of its server (0 = none); idle connections are retired before it
	ClosedBy       map[string]uint64 // Closed by reason (idle_expiry, lru_eviction, ...); sums to Closed
	OldestLease    time.Duration     // age of this route's oldest unreleased lease (0 = none)
	// SpareActors counts the connection actors the route keeps without a
	// socket, to serve its next dials (an actor whose connection closed is
	// recycled rather than stopped: a few per route, with no goroutine,
	// socket or buffer each; they stop once the route has had no connection
	// for MaxIdleTime).
	SpareActors int

	RecentCloses []ClosedConn // the last connection closes (evictions, expiries, ...), newest first, at most 16
	RecentWaits  []Wait       // the last leases that waited in the route's queue, newest first, at most 16

	// The fleet budget (Config.FleetMaxConnsPerRoute; all zero without one).
	// FleetShare is this node's current share of it: the most connections
	// the route may hold now (0 when none is set). FleetBudget is the
	// fleet-wide budget the share is part of. FleetState says where the
	// share comes from (FleetNone, FleetLease, FleetSafe, FleetFloor), and
	// FleetRenewal is how long the last answered call to the route's budget
	// grain took.
	FleetShare   int
	FleetBudget  int
	FleetState   string
	FleetRenewal time.Duration
}

// ClosedConn is one recent connection close of a route: when, why (Reason is
// e.g. "lru_eviction", "idle_expiry"), its age and how many requests it carried.
type ClosedConn = actors.ClosedConn

// Wait is one recent lease that waited in a route's queue: when it was granted,
// how long it waited and its position in the queue on arrival.
type Wait = actors.Wait

// ReuseRatio is the share of leases served by a re-used connection.
func (r RouteStats) ReuseRatio() float64 {
	if r.Leases == 0 {
		return 0
	}
	return float64(r.Reuses) / float64(r.Leases)
}

// Stats returns a snapshot of the pool: the supervisor names its routes, then
// each route actor reports its own counts by message (each route's numbers are
// consistent; routes are read one after the other). It blocks for two message
// round trips (three with a fleet budget: the fleet keeper's view too) and is
// safe for concurrent use. On a closed client it returns the zero Stats.
func (c *Client) Stats() Stats {
	ps, ok := c.pool.Stats()
	if !ok {
		return Stats{}
	}
	sr := ps.Supervisor
	st := Stats{MaxConnsTotal: sr.MaxTotal, Connections: sr.Total, Evictions: sr.Evictions, Expired: sr.Expired,
		PendingPermits: sr.PermitWaiters, PendingAdmission: ps.PendingAdmission, InFlight: ps.InFlight,
		DialFailures: sr.DialFailures, RouteFailures: sr.Restarts}
	st.Retries, st.RetriesRefused = c.budget.totals()
	for i, r := range ps.Routes {
		st.Routes = append(st.Routes, routeStats(r, ps.Handles[i]))
	}
	sort.Slice(st.Routes, func(i, j int) bool { return st.Routes[i].Route < st.Routes[j].Route })
	c.fleetStats(&st)
	for _, r := range st.Routes {
		st.Open += r.Open
		st.Leased += r.Leased
		st.Idle += r.Idle
		st.Pending += r.Pending
		st.Streams += r.Streams
		st.OldestLease = max(st.OldestLease, r.OldestLease)
	}
	return st
}

func routeStats(r actors.RouteStatsResponse, h *actors.RouteHandle) RouteStats {
	return RouteStats{Route: r.Route, Open: r.Open, Leased: r.Leased, Idle: r.Idle, Pending: r.Pending,
		FleetShare: int(h.Fleet.Share.Load()), FleetBudget: int(h.Fleet.Budget.Load()),
		Max: r.Max, Dialing: r.Dialing, Opened: r.Opened, Closed: r.Closed, Leases: r.Leases,
		Reuses: r.Reuses, DialFailures: r.DialFailures, LeaseTimeouts: r.LeaseTimeouts, ClosedBy: r.ClosedBy,
		QueueFull: r.QueueFull, FailFast: r.FailFast, FailFastUntil: r.FailFastUntil, FailedFast: r.FailedFast,
		LearnedIdle: r.LearnedIdle, Streams: r.Streams, SpareActors: r.Spare + r.Recycling,
		RecentCloses: r.RecentCloses, RecentWaits: r.RecentWaits, OldestLease: r.OldestLease}
}
