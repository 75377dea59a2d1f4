package protocol

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// maxMinLevel is water-filling the slow way: sort, then fill.
func maxMinLevel(budget int, ws []int) (level, leftover int, capped bool) {
	total := 0
	var pos []int
	for _, w := range ws {
		if w > 0 {
			total += w
			pos = append(pos, w)
		}
	}
	if total <= budget {
		return 0, budget - total, false
	}
	sort.Ints(pos)
	left := budget
	for i, w := range pos {
		fair := left / (len(pos) - i)
		if w > fair {
			return fair, left - fair*(len(pos)-i), true
		}
		left -= w
	}
	panic("unreachable")
}

func TestWantsLevelIsWaterFilling(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		n := 1 + rng.IntN(40)
		ws := make([]int, n)
		var w wants
		for i := range ws {
			ws[i] = rng.IntN(1 + rng.IntN(200))
			w.add(ws[i], 1)
		}
		// Remove and re-add some, as holders change their wants.
		for range rng.IntN(5) {
			i := rng.IntN(n)
			w.add(ws[i], -1)
			ws[i] = rng.IntN(300)
			w.add(ws[i], 1)
		}
		budget := rng.IntN(1 + rng.IntN(2000))
		gl, gr, gc := w.level(budget)
		wl, wr, wc := maxMinLevel(budget, ws)
		if gl != wl || gr != wr || gc != wc {
			t.Fatalf("trial %d: budget %d wants %v: level %d leftover %d capped %v, want %d %d %v", trial, budget, ws, gl, gr, gc, wl, wr, wc)
		}
	}
}
