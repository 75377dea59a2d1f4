package actors

import (
	"maps"
	"testing"

	"github.com/connactor/connactor/internal/testkit/loopbacks"
	"github.com/connactor/connactor/route"
)

// A route publishes its endpoints' open counts for the gauges when a dial or
// a close changes them, and stores nothing again for requests on the
// connections it has.
func TestARoutePublishesItsEndpointsWhenADialOrACloseChangesThem(t *testing.T) {
	addrs := loopbacks.Addrs(2, 3)
	f := newEPFixture(t, PoolConfig{MaxConnsPerRoute: 4}, loopbacks.Options{}, addrs...)
	if errs := f.hold(4).release(); len(errs) > 0 {
		t.Fatal(errs)
	}
	h := f.p.cachedRoute(t)
	published := func() map[string]int {
		out := map[string]int{}
		if eps := h.Pub.Endpoints.Load(); eps != nil {
			for _, e := range *eps {
				out[e.Addr.String()] = e.Open
			}
		}
		return out
	}
	opens := func(st route.Stats) map[string]int {
		out := map[string]int{}
		for _, e := range st.Endpoints {
			out[e.Addr.String()] = e.Open
		}
		return out
	}
	st := f.route()
	if got, want := published(), opens(st); len(got) != 2 || !maps.Equal(got, want) || st.Open != 4 {
		t.Fatalf("published %v, the route's endpoints %v (%d open)", got, want, st.Open)
	}
	stored := h.Pub.Endpoints.Load()
	for range 10 {
		if err := f.get("/"); err != nil {
			t.Fatal(err)
		}
	}
	f.route() // every release handled
	if h.Pub.Endpoints.Load() != stored {
		t.Fatal("requests on open connections stored the endpoints again")
	}
	f.p.CloseIdle()
	eventually(t, "the closes published", func() bool {
		for _, n := range published() {
			if n != 0 {
				return false
			}
		}
		return true
	})
	if got, want := published(), opens(f.route()); !maps.Equal(got, want) {
		t.Fatalf("published %v after the closes, the route's endpoints %v", got, want)
	}
}
