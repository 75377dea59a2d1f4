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

	"github.com/connactor/connactor/actors"
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

// The status JSON carries everything Stats has: every field of Stats and
// RouteStats has its namesake in StatusTotals and StatusRoute, so a field
// added to one and forgotten in the other fails here.
func TestStatusCarriesEveryFieldOfStats(t *testing.T) {
	for _, pair := range []struct {
		stats, status reflect.Type
		skip          string
	}{
		{reflect.TypeOf(Stats{}), reflect.TypeOf(StatusTotals{}), "Routes"},
		{reflect.TypeOf(RouteStats{}), reflect.TypeOf(StatusRoute{}), ""},
	} {
		for i := 0; i < pair.stats.NumField(); i++ {
			name := pair.stats.Field(i).Name
			if name == pair.skip {
				continue
			}
			if _, ok := pair.status.FieldByName(name); !ok {
				t.Errorf("%s.%s has no namesake in %s", pair.stats.Name(), name, pair.status.Name())
			}
		}
	}
}

// routeStats copies every field of the route actor's answer that RouteStats
// shares by name: a field added to both and forgotten in the copy fails here.
func TestRouteStatsCopiesEveryFieldOfTheRoutesAnswer(t *testing.T) {
	var in actors.RouteStatsResponse
	v := reflect.ValueOf(&in).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x")
		case reflect.Int, reflect.Int64:
			f.SetInt(7)
		case reflect.Uint64:
			f.SetUint(7)
		case reflect.Map:
			f.Set(reflect.ValueOf(map[string]uint64{"x": 1}))
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Struct:
			f.Set(reflect.ValueOf(time.Unix(7, 0)))
		default:
			t.Fatalf("field %s: kind %s not covered by the test", v.Type().Field(i).Name, f.Kind())
		}
	}
	out := reflect.ValueOf(routeStats(in, &actors.RouteHandle{Fleet: &actors.FleetPublished{}}))
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		if o := out.FieldByName(name); o.IsValid() && o.IsZero() {
			t.Errorf("RouteStats.%s is not copied from the route's answer", name)
		}
	}
}
