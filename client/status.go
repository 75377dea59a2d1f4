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
	Time   time.Time    `json:"time"`   // when the snapshot was taken
	Closed bool         `json:"closed"` // the client is closed or shutting down
	Limits StatusLimits `json:"limits"` // the configured limits
	Totals Stats        `json:"totals"` // the client-wide counts (its Routes left out: they follow)
	Routes []RouteStats `json:"routes"` // every route, sorted by name
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
		Totals: st,
		Routes: st.Routes,
	}
	s.Totals.Routes = nil
	if s.Routes == nil {
		s.Routes = []RouteStats{}
	}
	return s
}
