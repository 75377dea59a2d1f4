package status

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/route"
)

// snapshot is a Status with one route of some counts, taken at a fixed time.
func snapshot() Status {
	r := route.Stats{Route: "http://127.0.0.1:8080", Open: 1, Leased: 1, Max: 3, Opened: 1, Leases: 1,
		ClosedBy: map[string]uint64{}, RecentCloses: []route.ClosedConn{}, RecentWaits: []route.Wait{}}
	s := New(actors.Stats{Open: 1, Leased: 1, MaxConnsTotal: 5, Connections: 1, Routes: []route.Stats{r}}, false,
		Limits{MaxConnsPerRoute: 3, MaxConnsTotal: 5, MaxConcurrentRequests: 1024, LeaseTimeout: 2, MaxIdleTime: 90})
	s.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return s
}

func TestHandlerServesTheSnapshotAsJSON(t *testing.T) {
	want := snapshot()
	calls := 0
	h := Handler(func() Status { calls++; return want })
	for _, r := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/debug/connactor/?format=json", nil),
		httptest.NewRequest(http.MethodGet, "/debug/connactor/status.json", nil),
		func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/debug/connactor/", nil)
			r.Header.Set("Accept", "application/json")
			return r
		}(),
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var got Status
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %v, content type %q", r.URL, err, rec.Header().Get("Content-Type"))
		}
		hist := got.History
		got.History = nil // the handler's own: checked below
		if pts := hist[want.Routes[0].Route]; len(hist) != 1 || len(pts) != 1 || !pts[0].T.Equal(want.Time) {
			t.Errorf("%s: history %+v, want one point at the snapshot's time", r.URL, hist)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the JSON reads back as\n%+v\nwant\n%+v", r.URL, got, want)
		}
		if got.Limits.MaxConnsPerRoute != 3 || got.Limits.MaxConnsTotal != 5 || got.Limits.LeaseTimeout != 2 {
			t.Errorf("limits: %+v", got.Limits)
		}
		if len(got.Routes) != 1 || got.Routes[0].Leased != 1 || got.Totals.Open != 1 {
			t.Errorf("routes: %+v totals %+v", got.Routes, got.Totals)
		}
		if rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%s: Cache-Control %q", r.URL, rec.Header().Get("Cache-Control"))
		}
	}
	if calls != 3 {
		t.Errorf("three JSON answers took %d snapshots", calls)
	}
}

func TestStatusPageIsSelfContained(t *testing.T) {
	calls := 0
	h := Handler(func() Status { calls++; return snapshot() })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/connactor/", nil))
	page := rec.Body.String()
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q does not forbid outside loads", csp)
	}
	// Nothing from outside: no URL, no linked script, style, font or image.
	if m := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|<link|src=|@import|url\(`).FindString(page); m != "" {
		t.Errorf("the page refers to something outside: %q", m)
	}
	if !strings.Contains(page, `"?format=json"`) {
		t.Error("the page does not refresh from its JSON")
	}
	if calls != 0 {
		t.Errorf("serving the page took %d snapshots", calls)
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: status %d, Allow %q; want 405, GET, HEAD", rec.Code, rec.Header().Get("Allow"))
	}
}

// The status JSON carries everything Stats has: every field of actors.Stats
// (but Routes) is in its totals, and every field of route.Stats in each of
// its routes, under the field's JSON name, so that a field added without one
// fails here.
func TestStatusCarriesEveryFieldOfStats(t *testing.T) {
	b, err := json.Marshal(New(actors.Stats{Routes: []route.Stats{{Route: "http://127.0.0.1:8080"}}}, false, Limits{}))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Totals map[string]any   `json:"totals"`
		Routes []map[string]any `json:"routes"`
	}
	if err := json.Unmarshal(b, &s); err != nil || len(s.Routes) != 1 {
		t.Fatalf("%v: %s", err, b)
	}
	for _, pair := range []struct {
		typ  reflect.Type
		json map[string]any
		skip string
	}{
		{reflect.TypeOf(actors.Stats{}), s.Totals, "Routes"},
		{reflect.TypeOf(route.Stats{}), s.Routes[0], ""},
	} {
		for i := 0; i < pair.typ.NumField(); i++ {
			f := pair.typ.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Name == pair.skip || strings.Contains(opts, "omit") {
				continue // left out when empty: the route package's test covers them
			}
			if _, ok := pair.json[name]; name == "" || !ok {
				t.Errorf("%s.%s is not in the status JSON (as %q)", pair.typ.Name(), f.Name, name)
			}
		}
	}
	if _, ok := s.Totals["routes"]; ok {
		t.Error("the totals carry the routes too")
	}
}

// A client with no route yet shows an empty list, which the page's script
// reads as an array, not null.
func TestNoRouteIsAnEmptyListOfRoutes(t *testing.T) {
	b, err := json.Marshal(New(actors.Stats{}, true, Limits{}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"routes":[]`) || !strings.Contains(string(b), `"closed":true`) {
		t.Errorf("JSON of a closed client with no route: %s", b)
	}
}

// The history keeps a point a second at most for each route, of its limit and
// requests in flight, drops points older than HistoryWindow, and forgets a
// route the snapshot no longer has.
func TestTheHistoryKeepsEachRoutesLimitOverTheWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration, routes ...route.Stats) Status { return Status{Time: t0.Add(d), Routes: routes} }
	a := func(limit, inFlight int) route.Stats {
		return route.Stats{Route: "a", Limit: limit, InFlight: inFlight}
	}
	h := &history{}
	h.add(at(0, a(8, 3)))
	h.add(at(500*time.Millisecond, a(8, 5))) // within a second of the last point: not kept
	got := h.add(at(time.Second, a(4, 4), route.Stats{Route: "b", Limit: 2}))
	want := []Point{{T: t0, Limit: 8, InFlight: 3}, {T: t0.Add(time.Second), Limit: 4, InFlight: 4}}
	if !reflect.DeepEqual(got["a"], want) || len(got["b"]) != 1 {
		t.Fatalf("history %+v, want a: %+v and one point of b", got, want)
	}
	got = h.add(at(HistoryWindow+500*time.Millisecond, a(6, 1)))
	want = []Point{{T: t0.Add(time.Second), Limit: 4, InFlight: 4}, {T: t0.Add(HistoryWindow + 500*time.Millisecond), Limit: 6, InFlight: 1}}
	if !reflect.DeepEqual(got["a"], want) || len(got) != 1 || h.by["b"] != nil {
		t.Fatalf("after the window: %+v, want a: %+v and b forgotten", got, want)
	}
}

// The history follows at most HistoryRoutes routes: those held below their
// MaxConnsPerRoute first, then the others in the snapshot's order; a route
// it follows stays while the snapshot has it, and a free place goes to the
// next.
func TestTheHistoryFollowsABoundedSetOfRoutesLimitedOnesFirst(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	routes := make([]route.Stats, HistoryRoutes+8)
	for i := range routes {
		routes[i] = route.Stats{Route: fmt.Sprintf("r%03d", i), Limit: 8, Max: 8}
	}
	routes[len(routes)-1].Limit = 3 // held below its MaxConnsPerRoute
	h := &history{}
	got := h.add(Status{Time: t0, Routes: routes})
	if len(got) != HistoryRoutes || got[routes[len(routes)-1].Route] == nil || got[routes[HistoryRoutes-1].Route] != nil {
		t.Fatalf("followed %d routes (the limited one: %v, r%03d: %v), want %d, the limited one and the first %d others",
			len(got), got[routes[len(routes)-1].Route] != nil, HistoryRoutes-1, got[routes[HistoryRoutes-1].Route] != nil,
			HistoryRoutes, HistoryRoutes-1)
	}
	got = h.add(Status{Time: t0.Add(time.Second), Routes: routes[1:]}) // r000 is gone: r0NN takes its place
	if len(got) != HistoryRoutes || len(got[routes[1].Route]) != 2 || len(got[routes[HistoryRoutes-1].Route]) != 1 {
		t.Fatalf("after r000 went: %d routes, r001 %d points, r%03d %d; want %d, 2 and 1",
			len(got), len(got[routes[1].Route]), HistoryRoutes-1, len(got[routes[HistoryRoutes-1].Route]), HistoryRoutes)
	}
}
