package client

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// StatusHandler serves c's own snapshot: the limits of its Config, and its
// routes as its route actors report them. (The page and the JSON's format
// are internal/status's tests.)
func TestStatusHandlerServesThePoolAsJSON(t *testing.T) {
	checkLeaks(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") }))
	defer backend.Close()
	c := newClient(t, Config{MaxConnsPerRoute: 3, MaxConnsTotal: 5, LeaseTimeout: 2 * time.Second})
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
