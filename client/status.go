package client

import (
	"net/http"

	"github.com/connactor/connactor/internal/status"
)

// StatusHandler returns an http.Handler serving a live status page of c: a
// small self-contained HTML page (no external script, style, font or image)
// showing the limits, every route with bars of its leased, idle, dialing and
// pending connections and the addresses it spreads them over
// (RouteStats.Endpoints), and the recent evictions, expiries and lease waits.
// The page refreshes itself every second from the same data as JSON, which the
// handler serves for "?format=json", for a path ending in ".json", and for
// "Accept: application/json". Mount it anywhere, e.g.
//
//	mux.Handle("/debug/connactor/", client.StatusHandler(c))
//
// Each JSON answer costs one Stats call (a message to the supervisor and to
// each route). Safe for concurrent use. The page names routes (hosts, proxies,
// identities; never credentials): serve it on an internal address.
func StatusHandler(c *Client) http.Handler { return status.Handler(c.Status) }

// Status is what the status page shows, as StatusHandler serves it in JSON:
//
//	Time   time.Time    // when the snapshot was taken
//	Closed bool         // the client is closed or shutting down
//	Limits StatusLimits // the configured limits
//	Totals Stats        // the client-wide counts (its Routes left out: they follow)
//	Routes []RouteStats // every route, sorted by name
type Status = status.Status

// StatusLimits are the client's configured limits (durations in seconds; 0 =
// none), as the status page shows them: MaxConnsPerRoute, MaxConnsTotal,
// MaxConcurrentRequests, LeaseTimeout, MaxIdleTime and MaxLifetime, each the
// Config field of its name, and FleetMaxConnsPerRoute, Config.Fleet's budget
// per route.
type StatusLimits = status.Limits

// Status returns what the status page shows: the limits and a Stats snapshot.
// It blocks as Stats does and is safe for concurrent use.
func (c *Client) Status() Status {
	st := c.Stats()
	return status.New(st, c.pool.Closing(), StatusLimits{
		MaxConnsPerRoute: c.cfg.MaxConnsPerRoute, MaxConnsTotal: c.cfg.MaxConnsTotal,
		MaxConcurrentRequests: c.cfg.MaxConcurrentRequests, LeaseTimeout: c.cfg.LeaseTimeout.Seconds(),
		MaxIdleTime: c.cfg.MaxIdleTime.Seconds(), MaxLifetime: c.cfg.MaxLifetime.Seconds(),
		FleetMaxConnsPerRoute: c.cfg.fleetBudget(),
		Adaptive:              c.cfg.Adaptive != nil, QueueTarget: c.cfg.QueueTarget.Seconds(),
	})
}
