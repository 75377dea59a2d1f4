package main

import (
	"slices"
	"strings"
	"testing"
)

// The sweep's target applies over every stretch where net/http's curve is
// flat, not only the widest: a client flat at few callers and climbing at
// many must not pass because net/http's widest flat stretch is the first.
func TestSweepJudgesEveryFlatStretchOfNetHTTP(t *testing.T) {
	pts := func(xs []int, cpu ...float64) []sweepPoint {
		var out []sweepPoint
		for i, x := range xs {
			out = append(out, sweepPoint{x: x, cpu: cpu[i]})
		}
		return out
	}
	xs := []int{1, 4, 16, 64, 256, 1000}
	s := &sweep{name: "callers", server: "fasthttp", clients: []string{kindNetHTTP, kindConnactor},
		points: map[string][]sweepPoint{
			// flat over 1..4, climbs, flat over 16..64 and over 256..1000
			kindNetHTTP: pts(xs, 20, 21, 30, 31, 45, 48),
			// flat over 16..64, not over 256..1000
			kindConnactor: pts(xs, 15, 15.5, 20, 21, 25, 40),
		}}
	got := s.flatRanges(kindNetHTTP)
	want := [][2]int{{1, 4}, {16, 64}, {256, 1000}}
	if !slices.Equal(got, want) {
		t.Fatalf("flatRanges = %v, want %v", got, want)
	}
	sum := s.summary()
	for _, w := range []string{"callers 1..4", "callers 16..64", "callers 256..1000 net/http 1.07x, connactor 1.60x", "NOT MET"} {
		if !strings.Contains(sum, w) {
			t.Errorf("summary lacks %q:\n%s", w, sum)
		}
	}

	// connactor flat wherever net/http is: met.
	s.points[kindConnactor] = pts(xs, 15, 15.5, 20, 21, 25, 26)
	if sum := s.summary(); !strings.HasSuffix(sum, " met") {
		t.Errorf("summary should end in met:\n%s", sum)
	}

	// net/http flat nowhere: the target does not apply.
	s.points[kindNetHTTP] = pts(xs, 10, 20, 40, 80, 160, 320)
	if sum := s.summary(); !strings.Contains(sum, "none applies") {
		t.Errorf("summary should say none applies:\n%s", sum)
	}
}
