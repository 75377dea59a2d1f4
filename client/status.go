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
	Time   time.Time     `json:"time"`
	Closed bool          `json:"closed"`
	Limits StatusLimits  `json:"limits"`
	Totals StatusTotals  `json:"totals"`
	Routes []StatusRoute `json:"routes"`
}

// StatusLimits are the client's configured limits (durations in seconds; 0 = none).
type StatusLimits struct {
	MaxConnsPerRoute      int     `json:"maxConnsPerRoute"`
	MaxConnsTotal         int     `json:"maxConnsTotal"`
	MaxConcurrentRequests int     `json:"maxConcurrentRequests"`
	LeaseTimeout          float64 `json:"leaseTimeout"`
	MaxIdleTime           float64 `json:"maxIdleTime"`
	MaxLifetime           float64 `json:"maxLifetime"`
}

// StatusTotals are the client-wide counts of a Stats snapshot.
type StatusTotals struct {
	Open             int    `json:"open"`
	Leased           int    `json:"leased"`
	Idle             int    `json:"idle"`
	Pending          int    `json:"pending"`
	InFlight         int    `json:"inFlight"`
	PendingAdmission int    `json:"pendingAdmission"`
	PendingPermits   int    `json:"pendingPermits"`
	Evictions        uint64 `json:"evictions"`
	Expired          uint64 `json:"expired"`
}

// StatusRoute is one route of the status page.
type StatusRoute struct {
	Route        string            `json:"route"`
	Open         int               `json:"open"`
	Leased       int               `json:"leased"`
	Idle         int               `json:"idle"`
	Dialing      int               `json:"dialing"`
	Pending      int               `json:"pending"`
	Max          int               `json:"max"`
	Opened       uint64            `json:"opened"`
	Closed       uint64            `json:"closed"`
	Leases       uint64            `json:"leases"`
	Reuses       uint64            `json:"reuses"`
	ReuseRatio   float64           `json:"reuseRatio"`
	ClosedBy     map[string]uint64 `json:"closedBy"`
	RecentCloses []StatusClose     `json:"recentCloses"`
	RecentWaits  []StatusWait      `json:"recentWaits"`
}

// StatusClose is a recent connection close (Age in seconds).
type StatusClose struct {
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
	Age    float64   `json:"age"`
	Served int       `json:"served"`
}

// StatusWait is a recent lease that waited (Waited in seconds).
type StatusWait struct {
	At       time.Time `json:"at"`
	Waited   float64   `json:"waited"`
	QueuePos int       `json:"queuePos"`
}

// Status returns what the status page shows: the limits and a Stats snapshot.
// It blocks as Stats does and is safe for concurrent use.
func (c *Client) Status() Status {
	st := c.Stats()
	s := Status{
		Time:   time.Now(),
		Closed: c.closing.Load(),
		Limits: StatusLimits{
			MaxConnsPerRoute: c.cfg.MaxConnsPerRoute, MaxConnsTotal: c.cfg.MaxConnsTotal,
			MaxConcurrentRequests: c.cfg.MaxConcurrentRequests, LeaseTimeout: c.cfg.LeaseTimeout.Seconds(),
			MaxIdleTime: c.cfg.MaxIdleTime.Seconds(), MaxLifetime: c.cfg.MaxLifetime.Seconds(),
		},
		Totals: StatusTotals{Open: st.Open, Leased: st.Leased, Idle: st.Idle, Pending: st.Pending,
			InFlight: st.InFlight, PendingAdmission: st.PendingAdmission, PendingPermits: st.PendingPermits,
			Evictions: st.Evictions, Expired: st.Expired},
		Routes: make([]StatusRoute, 0, len(st.Routes)),
	}
	for _, r := range st.Routes {
		sr := StatusRoute{Route: r.Route, Open: r.Open, Leased: r.Leased, Idle: r.Idle, Dialing: r.Dialing,
			Pending: r.Pending, Max: r.Max, Opened: r.Opened, Closed: r.Closed, Leases: r.Leases,
			Reuses: r.Reuses, ReuseRatio: r.ReuseRatio(), ClosedBy: r.ClosedBy,
			RecentCloses: make([]StatusClose, 0, len(r.RecentCloses)),
			RecentWaits:  make([]StatusWait, 0, len(r.RecentWaits))}
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
