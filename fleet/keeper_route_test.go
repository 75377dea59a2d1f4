package fleet

import (
	"testing"
	"time"
)

func TestRouteShareWantsItsDemandPlusHeadroomInBlocks(t *testing.T) {
	p := &params{budget: 64, block: 4, idleRelease: time.Second}
	for _, tc := range []struct {
		name                string
		held, idle, waiting int
		idleFor             time.Duration
		want                int
	}{
		{"busy, nobody waiting", 6, 0, 0, 0, 8},
		{"a whole block in use asks for the next", 8, 0, 0, 0, 12},
		{"waiting callers count", 8, 0, 5, 0, 16},
		{"idle connections do not count", 8, 6, 0, 0, 4},
		{"never more than the budget", 60, 0, 30, 0, 64},
		{"idle lately: one block", 3, 3, 0, 500 * time.Millisecond, 4},
		{"idle long enough: nothing", 3, 3, 0, time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRouteShare(route, t0)
			r.usage(t0, tc.held, tc.idle, tc.waiting)
			if got := r.want(t0.Add(tc.idleFor), p); got != tc.want {
				t.Fatalf("want = %d, expected %d", got, tc.want)
			}
		})
	}
}

func TestRouteShareReportsItsPeakDemandSinceTheLastCall(t *testing.T) {
	p := &params{budget: 64, block: 1, idleRelease: time.Second, callTimeout: time.Second, maxInFlight: 4}
	r := newRouteShare(route, t0)
	r.usage(t0, 0, 0, 9)
	r.due(t0, p)
	r.usage(t0, 2, 2, 0) // a quiet instant just before the call
	if req := r.begin(t0, p, node("a"), 0); req.Want != 10 {
		t.Fatalf("call wants %d, want the peak 10", req.Want)
	}
	if req := r.begin(t0, p, node("a"), 0); req.Want != 1 {
		t.Fatalf("next call wants %d, want the quiet 1", req.Want)
	}
}
