package actors

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/connactor/connactor/internal/jsonsec"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
	"github.com/connactor/connactor/telemetry"
)

// Stats is a snapshot of a pool: client.Stats, and the totals of the status
// page (in JSON: durations in seconds). The pool fills it but for Retries,
// RetriesRefused and FleetMembers, and the routes' FleetState and
// FleetRenewal, which the client knows.
type Stats struct {
	// Open counts connections open or being dialed; Leased, those serving a
	// request (their body not yet read to its end or closed); Idle, those
	// waiting in the idle list; Pending, callers waiting for a connection.
	// All four are totals across routes (see route.Stats).
	Open    int           `json:"open"`
	Leased  int           `json:"leased"`
	Idle    int           `json:"idle"`
	Pending int           `json:"pending"`
	Streams int           `json:"streams"`          // HTTP/2 streams in flight across routes
	Routes  []route.Stats `json:"routes,omitempty"` // every route, sorted by name

	MaxConnsTotal int `json:"maxConnsTotal"` // MaxConnsTotal
	// Connections is the supervisor's own count of open and dialing connections
	// across routes: always <= MaxConnsTotal. Open (the sum over Routes) may
	// briefly differ, since routes are read one after the other: a connection
	// closed on one route and its place re-used on another can both show.
	Connections int `json:"connections"`
	// InFlight is the number of requests admitted under MaxConcurrentRequests:
	// those waiting for a connection (queued in a route) and those being
	// exchanged or whose response body is still open.
	InFlight         int    `json:"inFlight"`
	PendingAdmission int    `json:"pendingAdmission"` // requests waiting for admission under MaxConcurrentRequests
	PendingPermits   int    `json:"pendingPermits"`   // routes' requests for room under MaxConnsTotal
	Evictions        uint64 `json:"evictions"`        // idle connections closed to make room for another route
	Expired          uint64 `json:"expired"`          // idle connections closed by idle, keep-alive or lifetime expiry
	DialFailures     uint64 `json:"dialFailures"`     // dials that failed, all routes
	RouteFailures    uint64 `json:"routeFailures"`    // route actors that failed (panicked) and were replaced
	RoutesReclaimed  uint64 `json:"routesReclaimed"`  // routes reclaimed after MaxIdleTime unused (no connection, no waiter)
	Retries          uint64 `json:"retries"`          // replays on a new connection the retry budget allowed (0 when it is disabled)
	RetriesRefused   uint64 `json:"retriesRefused"`   // replays the retry budget refused
	// OldestLease is the age of the oldest lease not yet released, across routes
	// (0 = none). A response whose body is never read to its end nor closed holds
	// its connection forever: it shows here, growing.
	OldestLease time.Duration `json:"oldestLease"`
	// FleetMembers is the number of nodes (clients with a fleet budget)
	// registered in the fleet, as this node last heard (0 without a fleet
	// budget, or until known): the default floor divides the budget by it.
	FleetMembers int `json:"fleetMembers"`
}

// String prints st as a short table: the totals on one line, then a row per
// route.
func (st Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "connactor: %d open (%d leased, %d idle), %d pending, %d streams; %d/%d connections, %d in flight, %d waiting for admission\n",
		st.Open, st.Leased, st.Idle, st.Pending, st.Streams, st.Connections, st.MaxConnsTotal, st.InFlight, st.PendingAdmission)
	if len(st.Routes) > 0 {
		route.WriteTable(&b, st.Routes...)
	}
	return b.String()
}

// plainStats is Stats without its methods, for the JSON of its fields; the
// fields of statsJSON, less nested, shadow those of the same names.
type plainStats Stats

type statsJSON struct {
	*plainStats
	OldestLease jsonsec.Duration `json:"oldestLease"`
}

// MarshalJSON writes st with its durations in seconds.
func (st Stats) MarshalJSON() ([]byte, error) {
	return json.Marshal(statsJSON{plainStats: (*plainStats)(&st), OldestLease: jsonsec.Duration(st.OldestLease)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (st *Stats) UnmarshalJSON(b []byte) error {
	v := statsJSON{plainStats: (*plainStats)(st)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	st.OldestLease = time.Duration(v.OldestLease)
	return nil
}

// Stats returns a snapshot of the pool: the supervisor names its routes, then
// each route actor reports its own counts by message (each route's numbers are
// consistent; routes are read one after the other). It blocks for two message
// round trips and is safe for concurrent use. On a closed pool it reports
// false.
func (p *Pool) Stats() (Stats, bool) {
	if p.isClosed() {
		return Stats{}, false
	}
	sr, ok := p.supervisorStats()
	if !ok {
		return Stats{}, false
	}
	st := Stats{MaxConnsTotal: sr.MaxTotal, Connections: sr.Total, Evictions: sr.Evictions, Expired: sr.Expired,
		PendingPermits: sr.PermitWaiters, DialFailures: sr.DialFailures, RouteFailures: sr.Restarts,
		RoutesReclaimed: sr.Reclaimed}
	st.InFlight, st.PendingAdmission = p.admission.Held()
	tickets := make([]wait.Ticket[routeReport], len(sr.Routes))
	foreign := p.home.Foreign(time.Now())
	for i, h := range sr.Routes {
		postFrom(p, foreign, h.mb, &RouteStatsRequest{Ticket: &tickets[i]})
	}
	for i, h := range sr.Routes {
		t := &tickets[i]
		<-readyOf(p, foreign, t) // a route that stopped under us answers through its mailbox
		if r, err, _ := t.Result(); err == nil {
			st.Routes = append(st.Routes, h.stats(r))
		}
	}
	if p.isClosed() {
		return Stats{}, false
	}
	sort.Slice(st.Routes, func(i, j int) bool { return st.Routes[i].Route < st.Routes[j].Route })
	for _, r := range st.Routes {
		st.Open += r.Open
		st.Leased += r.Leased
		st.Idle += r.Idle
		st.Pending += r.Pending
		st.Streams += r.Streams
		st.OldestLease = max(st.OldestLease, r.OldestLease)
	}
	return st, true
}

// stats is the route's answer with its fleet share as the supervisor enforces it.
func (h *routeHandle) stats(r routeReport) route.Stats {
	r.FleetShare, r.FleetBudget = int(h.Fleet.Share.Load()), int(h.Fleet.Budget.Load())
	return r.Stats
}

// supervisorStats asks the supervisor for its counts and its routes; false
// when the pool closed meanwhile.
func (p *Pool) supervisorStats() (StatsResponse, bool) {
	t := &wait.Ticket[StatsResponse]{}
	foreign := p.home.Foreign(time.Now()) // Stats is no hot path: one clock read
	postFrom(p, foreign, p.supMB, &StatsRequest{Ticket: t})
	<-readyOf(p, foreign, t) // a supervisor that stopped answers through its mailbox
	sr, err, _ := t.Result()
	return sr, err == nil
}

// CloseIdle closes every idle connection of every route now (connections in
// use are left alone and stay pooled). It blocks until every route has closed
// its idle connections, and is safe for concurrent use. On a closed pool it
// does nothing.
func (p *Pool) CloseIdle() {
	if p.isClosed() {
		return
	}
	sr, ok := p.supervisorStats()
	if !ok {
		return
	}
	tickets := make([]wait.Ticket[int], len(sr.Routes))
	foreign := p.home.Foreign(time.Now())
	for i, h := range sr.Routes {
		postFrom(p, foreign, h.mb, &CloseIdleRequest{Ticket: &tickets[i]})
	}
	for i := range tickets {
		<-readyOf(p, foreign, &tickets[i]) // a route that stopped answers through its mailbox
	}
}

// registerGauges registers the pool gauges' callback with the client's meter.
// The callback reads only the counters the route actors publish
// (routePublished) and the admission semaphore: it never messages or waits for an actor, so a slow or
// stuck collection cannot hold the pool up, and the pool cannot hold up a
// collection.
func (p *Pool) registerGauges() {
	err := p.tel.RegisterPool(p.routeReadings, func() int64 { _, waiting := p.admission.Held(); return int64(waiting) })
	if err != nil {
		p.cfg.Logger.Warn("connactor: pool gauges not registered", "err", err)
	}
}

// routeReadings yields the published counters of every live route the pool
// knows (every route a request went to).
func (p *Pool) routeReadings(yield func(telemetry.RouteReading) bool) {
	p.routes.Range(func(k, v any) bool {
		h := v.(*routeHandle)
		select {
		case <-h.Done:
			return true
		default:
		}
		key := k.(route.Key)
		ff := route.FailFastClosed // or half open: the gauge tells open from not
		if h.Pub.FailFast.Load() {
			ff = route.FailFastOpen
		}
		st := route.Stats{Leased: int(h.Pub.Leased.Load()), Idle: int(h.Pub.Idle.Load()),
			Pending: int(h.Pub.Pending.Load()), FailFast: ff, LearnedIdle: time.Duration(h.Pub.LearnedIdle.Load()),
			FleetShare: int(h.Fleet.Share.Load()), Limit: int(h.Pub.Limit.Load())}
		if eps := h.Pub.Endpoints.Load(); eps != nil {
			st.Endpoints = *eps // published once, never written again
		}
		return yield(telemetry.RouteReading{Route: p.tel.Route(key.Scheme, key.Host, key.Port), Fleet: p.fleet, Stats: st})
	})
}
