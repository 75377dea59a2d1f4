package client

import (
	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/route"
)

// Stats is a snapshot of the client's pool: totals across routes, the
// client-wide counts (limits, admission, evictions, retries) and every route
// (Routes, sorted by name). It prints as a short table (String) and encodes
// to JSON as the status page serves it (durations in seconds).
type Stats = actors.Stats

// RouteStats is one route's snapshot (see Stats.Routes): its connections
// open, leased, idle and dialing, its waiting callers, its limit, HTTP/2
// streams, counters since it started, its policies' state and its recent
// closes and waits. ReuseRatio is the share of its leases served by a
// re-used connection. It prints as a short table (String).
type RouteStats = route.Stats

// EndpointStats is one address of a route's host (RouteStats.Endpoints):
// the route's connections to it open, leased and idle, its HTTP/2 streams in
// flight (Streams), its dials and failed dials, its ejections for failed
// exchanges (Ejections, Config.Outlier), and whether it is ejected
// (EjectedUntil: its dials or, with EjectedBy "exchanges", its exchanges
// failed, and it is left alone until then) or draining (it left the host's
// answer).
type EndpointStats = route.EndpointStats

// ClosedConn is one recent connection close of a route: when, why (Reason is
// e.g. "lru_eviction", "idle_expiry"), its age and how many requests it carried.
type ClosedConn = route.ClosedConn

// Wait is one recent lease that waited in a route's queue: when it was granted,
// how long it waited and its position in the queue on arrival.
type Wait = route.Wait

// Stats returns a snapshot of the pool: the supervisor names its routes, then
// each route actor reports its own counts by message (each route's numbers are
// consistent; routes are read one after the other). It blocks for two message
// round trips (three with a fleet budget: the fleet keeper's view too) and is
// safe for concurrent use. On a closed client it returns the zero Stats.
func (c *Client) Stats() Stats {
	st, ok := c.pool.Stats()
	if !ok {
		return Stats{}
	}
	st.Retries, st.RetriesRefused = c.budget.totals()
	c.fleetStats(&st)
	return st
}
