package client

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

//go:embed status.html
var statusPage []byte

// StatusHandler returns an http.Handler serving a live status page of c: a
// small self-contained HTML page (no external script, style, font or image)
// showing the limits, every route with bars of its leased, idle, dialing and
// pending connections, and the recent evictions, expiries and lease waits. The
// page refreshes itself every second from the same data as JSON, which the
// handler serves for "?format=json", for a path ending in ".json", and for
// "Accept: application/json". Mount it anywhere, e.g.
//
//	mux.Handle("/debug/connactor/", client.StatusHandler(c))
//
// Each JSON answer costs one Stats call (a message to the supervisor and to
// each route). Safe for concurrent use. The page names routes (hosts, proxies,
// identities; never credentials): serve it on an internal address.
func StatusHandler(c *Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if wantsJSON(r) {
			w.Header().Set("Content-Type", "application/json")
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			enc.Encode(c.Status())
			return
		}
		// The page runs its own inline script and nothing else.
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(statusPage)
	})
}

func wantsJSON(r *http.Request) bool {
	return r.URL.Query().Get("format") == "json" || strings.HasSuffix(r.URL.Path, ".json") ||
		strings.Contains(r.Header.Get("Accept"), "application/json")
}

// Status is what the status page shows, as StatusHandler serves it in JSON.
type Status struct {
	Time   time.Time     `json:"time"`   // when the snapshot was taken
	Closed bool          `json:"closed"` // the client is closed or shutting down
	Limits StatusLimits  `json:"limits"` // the configured limits
	Totals StatusTotals  `json:"totals"` // the client-wide counts
	Routes []StatusRoute `json:"routes"` // every route, sorted by name
}

// StatusLimits are the client's configured limits (durations in seconds; 0 = none).
type StatusLimits struct {
	MaxConnsPerRoute      int     `json:"maxConnsPerRoute"`      // Config.MaxConnsPerRoute
	MaxConnsTotal         int     `json:"maxConnsTotal"`         // Config.MaxConnsTotal
	MaxConcurrentRequests int     `json:"maxConcurrentRequests"` // Config.MaxConcurrentRequests
	LeaseTimeout          float64 `json:"leaseTimeout"`          // Config.LeaseTimeout
	MaxIdleTime           float64 `json:"maxIdleTime"`           // Config.MaxIdleTime
	MaxLifetime           float64 `json:"maxLifetime"`           // Config.MaxLifetime
	FleetMaxConnsPerRoute int     `json:"fleetMaxConnsPerRoute"` // Config.FleetMaxConnsPerRoute (0 = no fleet budget)
}

// StatusTotals are the client-wide counts of a Stats snapshot, field for
// field (durations in seconds); see Stats for their meaning.
type StatusTotals struct {
	Open             int     `json:"open"`             // Stats.Open
	Leased           int     `json:"leased"`           // Stats.Leased
	Idle             int     `json:"idle"`             // Stats.Idle
	Pending          int     `json:"pending"`          // Stats.Pending
	Streams          int     `json:"streams"`          // Stats.Streams
	MaxConnsTotal    int     `json:"maxConnsTotal"`    // Stats.MaxConnsTotal
	Connections      int     `json:"connections"`      // Stats.Connections
	InFlight         int     `json:"inFlight"`         // Stats.InFlight
	PendingAdmission int     `json:"pendingAdmission"` // Stats.PendingAdmission
	PendingPermits   int     `json:"pendingPermits"`   // Stats.PendingPermits
	Evictions        uint64  `json:"evictions"`        // Stats.Evictions
	Expired          uint64  `json:"expired"`          // Stats.Expired
	DialFailures     uint64  `json:"dialFailures"`     // Stats.DialFailures
	RouteFailures    uint64  `json:"routeFailures"`    // Stats.RouteFailures
	Retries          uint64  `json:"retries"`          // Stats.Retries
	RetriesRefused   uint64  `json:"retriesRefused"`   // Stats.RetriesRefused
	OldestLease      float64 `json:"oldestLease"`      // Stats.OldestLease
	FleetMembers     int     `json:"fleetMembers"`     // Stats.FleetMembers
}

// StatusRoute is one route of the status page: a RouteStats, field for field
// (durations in seconds), and its reuse ratio.
type StatusRoute struct {
	Route         string            `json:"route"`                   // RouteStats.Route
	Open          int               `json:"open"`                    // RouteStats.Open
	Leased        int               `json:"leased"`                  // RouteStats.Leased
	Idle          int               `json:"idle"`                    // RouteStats.Idle
	Dialing       int               `json:"dialing"`                 // RouteStats.Dialing
	Pending       int               `json:"pending"`                 // RouteStats.Pending
	Max           int               `json:"max"`                     // RouteStats.Max
	Streams       int               `json:"streams"`                 // RouteStats.Streams
	Opened        uint64            `json:"opened"`                  // RouteStats.Opened
	Closed        uint64            `json:"closed"`                  // RouteStats.Closed
	Leases        uint64            `json:"leases"`                  // RouteStats.Leases
	Reuses        uint64            `json:"reuses"`                  // RouteStats.Reuses
	DialFailures  uint64            `json:"dialFailures"`            // RouteStats.DialFailures
	LeaseTimeouts uint64            `json:"leaseTimeouts"`           // RouteStats.LeaseTimeouts
	QueueFull     uint64            `json:"queueFull"`               // RouteStats.QueueFull
	FailFast      string            `json:"failFast"`                // RouteStats.FailFast
	FailFastUntil *time.Time        `json:"failFastUntil,omitempty"` // RouteStats.FailFastUntil (while open)
	FailedFast    uint64            `json:"failedFast"`              // RouteStats.FailedFast
	LearnedIdle   float64           `json:"learnedIdle"`             // RouteStats.LearnedIdle
	OldestLease   float64           `json:"oldestLease"`             // RouteStats.OldestLease
	SpareActors   int               `json:"spareActors"`             // RouteStats.SpareActors
	ReuseRatio    float64           `json:"reuseRatio"`              // Reuses / Leases
	ClosedBy      map[string]uint64 `json:"closedBy"`                // RouteStats.ClosedBy
	RecentCloses  []StatusClose     `json:"recentCloses"`            // RouteStats.RecentCloses
	RecentWaits   []StatusWait      `json:"recentWaits"`             // RouteStats.RecentWaits
	FleetShare    int               `json:"fleetShare"`              // RouteStats.FleetShare
	FleetBudget   int               `json:"fleetBudget"`             // RouteStats.FleetBudget
	FleetState    string            `json:"fleetState,omitempty"`    // RouteStats.FleetState ("" without a fleet budget)
	FleetRenewal  float64           `json:"fleetRenewal"`            // RouteStats.FleetRenewal
}

// StatusClose is a recent connection close (Age in seconds).
type StatusClose struct {
	At     time.Time `json:"at"`     // when it closed
	Reason string    `json:"reason"` // why: lru_eviction, idle_expiry, not_reusable, ...
	Age    float64   `json:"age"`    // seconds since it was opened
	Served int       `json:"served"` // requests it carried
}

// StatusWait is a recent lease that waited (Waited in seconds).
type StatusWait struct {
	At       time.Time `json:"at"`       // when the lease was granted
	Waited   float64   `json:"waited"`   // seconds it waited
	QueuePos int       `json:"queuePos"` // its position in the queue on arrival (1 = first)
}

// Status returns what the status page shows: the limits and a Stats snapshot.
// It blocks as Stats does and is safe for concurrent use.
func (c *Client) Status() Status {
	st := c.Stats()
	s := Status{
		Time:   time.Now(),
		Closed: c.pool.Closing(),
		Limits: StatusLimits{
			MaxConnsPerRoute: c.cfg.MaxConnsPerRoute, MaxConnsTotal: c.cfg.MaxConnsTotal,
			MaxConcurrentRequests: c.cfg.MaxConcurrentRequests, LeaseTimeout: c.cfg.LeaseTimeout.Seconds(),
			MaxIdleTime: c.cfg.MaxIdleTime.Seconds(), MaxLifetime: c.cfg.MaxLifetime.Seconds(),
			FleetMaxConnsPerRoute: c.cfg.FleetMaxConnsPerRoute,
		},
		Totals: StatusTotals{Open: st.Open, Leased: st.Leased, Idle: st.Idle, Pending: st.Pending, Streams: st.Streams,
			MaxConnsTotal: st.MaxConnsTotal, Connections: st.Connections,
			InFlight: st.InFlight, PendingAdmission: st.PendingAdmission, PendingPermits: st.PendingPermits,
			Evictions: st.Evictions, Expired: st.Expired, DialFailures: st.DialFailures,
			RouteFailures: st.RouteFailures, Retries: st.Retries, RetriesRefused: st.RetriesRefused,
			OldestLease: st.OldestLease.Seconds(), FleetMembers: st.FleetMembers},
		Routes: make([]StatusRoute, 0, len(st.Routes)),
	}
	for _, r := range st.Routes {
		sr := StatusRoute{Route: r.Route, Open: r.Open, Leased: r.Leased, Idle: r.Idle, Dialing: r.Dialing,
			Pending: r.Pending, Max: r.Max, Streams: r.Streams, Opened: r.Opened, Closed: r.Closed, Leases: r.Leases,
			Reuses: r.Reuses, DialFailures: r.DialFailures, LeaseTimeouts: r.LeaseTimeouts,
			OldestLease: r.OldestLease.Seconds(), ReuseRatio: r.ReuseRatio(), ClosedBy: r.ClosedBy,
			QueueFull: r.QueueFull, FailFast: r.FailFast, FailedFast: r.FailedFast, LearnedIdle: r.LearnedIdle.Seconds(),
			SpareActors: r.SpareActors, FleetShare: r.FleetShare, FleetBudget: r.FleetBudget, FleetState: r.FleetState, FleetRenewal: r.FleetRenewal.Seconds(),
			RecentCloses: make([]StatusClose, 0, len(r.RecentCloses)),
			RecentWaits:  make([]StatusWait, 0, len(r.RecentWaits))}
		if !r.FailFastUntil.IsZero() {
			until := r.FailFastUntil
			sr.FailFastUntil = &until
		}
		for _, e := range r.RecentCloses {
			sr.RecentCloses = append(sr.RecentCloses, StatusClose{At: e.At, Reason: string(e.Reason), Age: e.Age.Seconds(), Served: e.Served})
		}
		for _, e := range r.RecentWaits {
			sr.RecentWaits = append(sr.RecentWaits, StatusWait{At: e.At, Waited: e.Waited.Seconds(), QueuePos: e.QueuePos})
		}
		s.Routes = append(s.Routes, sr)
	}
	return s
}
