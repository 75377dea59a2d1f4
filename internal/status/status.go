// Package status serves a pool's live status page and its JSON: a small
// self-contained HTML page (no external script, style, font or image) whose
// inline script renders the JSON and asks for it again every second.
//
// It renders what the pool reports and nothing else: the Stats snapshot
// (actors.Stats, with a route.Stats per route) and the limits the embedding
// client was configured with. It takes only those values from the actors and
// route packages, and nothing from the client: Handler calls the snapshot
// function it is given, once per JSON answer.
// Package client re-exports it: StatusHandler mounts Handler on a client's
// Status method, Status and StatusLimits are aliases of Status and Limits.
//
// The JSON is a contract with the page's script and with users who scrape
// it: field names are the struct tags of Status, Limits, actors.Stats and
// route.Stats, durations are seconds. To show a new part of the snapshot,
// add it to the Stats types (it then appears in the JSON) and give the page
// a section: an element in status.html and a render function in the list
// of sections its script renders in turn.
package status

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/route"
)

//go:embed status.html
var page []byte

// Status is what the status page shows, as Handler serves it in JSON.
type Status struct {
	Time   time.Time     `json:"time"`   // when the snapshot was taken
	Closed bool          `json:"closed"` // the client is closed or shutting down
	Limits Limits        `json:"limits"` // the configured limits
	Totals actors.Stats  `json:"totals"` // the client-wide counts (its Routes left out: they follow)
	Routes []route.Stats `json:"routes"` // every route, sorted by name
	// History is the limit and requests in flight over the last
	// HistoryWindow of up to HistoryRoutes routes (see history.add), one
	// point a second at most, as the handler saw them (it samples each
	// time it answers JSON: while the page is open, every second). Set by
	// Handler.
	History map[string][]Point `json:"history"`
}

// Point is one sample of a route's limit and requests in flight
// (route.Stats.Limit, InFlight).
type Point struct {
	T        time.Time `json:"t"`
	Limit    int       `json:"limit"`
	InFlight int       `json:"inFlight"`
}

// HistoryWindow is how far back Status.History goes.
const HistoryWindow = 5 * time.Minute

// historyEvery is the least time between two points of a route.
const historyEvery = 900 * time.Millisecond

// HistoryRoutes bounds the routes Status.History follows: a page of charts,
// where a client may have 100,000 routes (five minutes of points are
// about 12 KB a route, kept and sent every second).
const HistoryRoutes = 32

// history is a handler's Status.History: its own state, kept between its
// JSON answers.
type history struct {
	mu sync.Mutex
	by map[string][]Point
}

// add records s's routes in h, drops the points older than HistoryWindow
// and the routes s no longer has, and returns the points for s.History. It
// follows at most HistoryRoutes routes: those it follows already, then, as
// room comes free, routes held below their MaxConnsPerRoute (an adaptive
// limit, the host's or the fleet's share) before the others, in s's order.
// The slices it returns are never written again (later points are
// appended past their ends), so they are not copied.
func (h *history) add(s Status) map[string][]Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.by == nil {
		h.by = map[string][]Point{}
	}
	seen := make(map[string]bool, len(s.Routes))
	for _, r := range s.Routes {
		seen[r.Route] = true
	}
	for name := range h.by {
		if !seen[name] {
			delete(h.by, name)
		}
	}
	for _, limited := range []bool{true, false} {
		for _, r := range s.Routes {
			if _, ok := h.by[r.Route]; !ok && len(h.by) < HistoryRoutes && (r.Limit < r.Max) == limited {
				h.by[r.Route] = nil
			}
		}
	}
	out := make(map[string][]Point, len(h.by))
	for _, r := range s.Routes {
		pts, ok := h.by[r.Route]
		if !ok {
			continue
		}
		if n := len(pts); n == 0 || s.Time.Sub(pts[n-1].T) >= historyEvery {
			pts = append(pts, Point{T: s.Time, Limit: r.Limit, InFlight: r.InFlight})
		}
		i := 0
		for i < len(pts) && s.Time.Sub(pts[i].T) > HistoryWindow {
			i++
		}
		pts = pts[i:]
		h.by[r.Route] = pts
		out[r.Route] = pts[:len(pts):len(pts)]
	}
	return out
}

// Limits are the client's configured limits (durations in seconds; 0 = none).
type Limits struct {
	MaxConnsPerRoute      int     `json:"maxConnsPerRoute"`      // Config.MaxConnsPerRoute
	MaxConnsTotal         int     `json:"maxConnsTotal"`         // Config.MaxConnsTotal
	MaxConcurrentRequests int     `json:"maxConcurrentRequests"` // Config.MaxConcurrentRequests
	LeaseTimeout          float64 `json:"leaseTimeout"`          // Config.LeaseTimeout
	MaxIdleTime           float64 `json:"maxIdleTime"`           // Config.MaxIdleTime
	MaxLifetime           float64 `json:"maxLifetime"`           // Config.MaxLifetime
	Adaptive              bool    `json:"adaptive"`              // Config.Adaptive is set
	QueueTarget           float64 `json:"queueTarget"`           // Config.QueueTarget
	FleetMaxConnsPerRoute int     `json:"fleetMaxConnsPerRoute"` // Config.Fleet's budget per route (0 = no fleet budget)
}

// New returns the Status of st, a snapshot taken just now of a client that
// is closed (or shutting down) when closed is set, configured with limits.
// The routes move from Totals to Routes, which is empty, not nil, when
// there are none (the page's script reads an array).
func New(st actors.Stats, closed bool, limits Limits) Status {
	s := Status{Time: time.Now(), Closed: closed, Limits: limits, Totals: st, Routes: st.Routes}
	s.Totals.Routes = nil
	if s.Routes == nil {
		s.Routes = []route.Stats{}
	}
	return s
}

// Handler returns an http.Handler serving the status page of what snapshot
// returns: the page for GET and HEAD, its JSON for "?format=json", for a path
// ending in ".json" and for "Accept: application/json". Each JSON answer
// calls snapshot once; the page itself calls nothing. It is safe for
// concurrent use when snapshot is.
func Handler(snapshot func() Status) http.Handler {
	h := &history{}
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
			s := snapshot()
			s.History = h.add(s)
			enc.Encode(s)
			return
		}
		// The page runs its own inline script and nothing else.
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	})
}

func wantsJSON(r *http.Request) bool {
	return r.URL.Query().Get("format") == "json" || strings.HasSuffix(r.URL.Path, ".json") ||
		strings.Contains(r.Header.Get("Accept"), "application/json")
}
