package client

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestStatusHandlerServesThePoolAsJSON(t *testing.T) {
	checkLeaks(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") }))
	defer backend.Close()
	c, err := New(Config{MaxConnsPerRoute: 3, MaxConnsTotal: 5, LeaseTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, err := getURL(c, backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Body.Close()
	status := httptest.NewServer(StatusHandler(c))
	defer status.Close()

	for _, u := range []string{status.URL + "/?format=json", status.URL + "/status.json"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		var s Status
		err = json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		if err != nil || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %v, content type %q", u, err, resp.Header.Get("Content-Type"))
		}
		if s.Limits.MaxConnsPerRoute != 3 || s.Limits.MaxConnsTotal != 5 || s.Limits.LeaseTimeout != 2 {
			t.Errorf("limits: %+v", s.Limits)
		}
		if len(s.Routes) != 1 || s.Routes[0].Route != backend.URL || s.Routes[0].Leased != 1 ||
			s.Routes[0].Max != 3 || s.Routes[0].Opened != 1 || s.Totals.Open != 1 {
			t.Errorf("routes: %+v totals %+v", s.Routes, s.Totals)
		}
	}
}

func TestStatusPageIsSelfContained(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec := httptest.NewRecorder()
	StatusHandler(c).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/connactor/", nil))
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

	rec = httptest.NewRecorder()
	StatusHandler(c).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d, want 405", rec.Code)
	}
}

// The status JSON carries everything Stats has: every field of Stats (but
// Routes) is in its totals, and every field of RouteStats in each of its
// routes, under the field's JSON name, so that a field added without one
// fails here.
func TestStatusCarriesEveryFieldOfStats(t *testing.T) {
	checkLeaks(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") }))
	defer backend.Close()
	c := newClient(t, Config{})
	get(t, c, backend.URL)
	b, err := json.Marshal(c.Status())
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
		{reflect.TypeOf(Stats{}), s.Totals, "Routes"},
		{reflect.TypeOf(RouteStats{}), s.Routes[0], ""},
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
