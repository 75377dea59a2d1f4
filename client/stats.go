package client

import (
	"time"

	"github.com/connactor/connactor/actors"
)

// Stats is a snapshot of the client's pool.
type Stats struct {
	Open, Leased, Idle, Pending int // totals across routes
	Routes                      []RouteStats

	MaxConnsTotal int
	// Connections is the supervisor's own count of open and dialing connections
	// across routes: always <= MaxConnsTotal. Open (the sum over Routes) may
	// briefly differ, since routes are read one after the other: a connection
	// closed on one route and its place re-used on another can both show.
	Connections      int
	InFlight         int    // admitted requests (MaxConcurrentRequests counts these)
	PendingAdmission int    // requests waiting for admission
	PendingPermits   int    // routes' requests for room under MaxConnsTotal
	Evictions        uint64 // LRU evictions of idle connections for another route
	Expired          uint64 // idle connections closed by idle, keep-alive or lifetime expiry
	// OldestLease is the age of the oldest lease not yet released, across routes
	// (0 = none). A response whose body is never read to its end nor closed holds
	// its connection forever: it shows here, growing.
	OldestLease time.Duration
}

// RouteStats is one route's snapshot.
type RouteStats struct {
	Route                       string // e.g. "http://127.0.0.1:8080"; names proxy and identity when set
	Open, Leased, Idle, Pending int
	Max                         int

	Dialing        int               // connections being dialed (counted in Open)
	Opened, Closed uint64            // connections opened and closed since the route started
	Leases, Reuses uint64            // leases granted, and of those on a re-used connection
	ClosedBy       map[string]uint64 // closed connections by reason (idle_expiry, lru_eviction, ...)
	OldestLease    time.Duration     // age of this route's oldest unreleased lease (0 = none)

	RecentCloses []ClosedConn // the last connection closes (evictions, expiries, ...), newest first, at most 16
	RecentWaits  []Wait       // the last leases that waited in the route's queue, newest first, at most 16
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

func routeStats(r actors.RouteStats) RouteStats {
	return RouteStats{Route: r.Route, Open: r.Open, Leased: r.Leased, Idle: r.Idle, Pending: r.Pending,
		Max: r.Max, Dialing: r.Dialing, Opened: r.Opened, Closed: r.Closed, Leases: r.Leases,
		Reuses: r.Reuses, ClosedBy: r.ClosedBy, RecentCloses: r.RecentCloses, RecentWaits: r.RecentWaits,
		OldestLease: r.OldestLease}
}
