package protocol

import "math/bits"

// wants holds the demands of a ledger's live holders, for the max-min fair
// level in O(log W) (W the largest want): two Fenwick trees over want values,
// one counting holders, one summing their wants. Adding, removing and asking
// the level are O(log W); nothing re-sorts the holders.
type wants struct {
	cnt, sum []int64 // Fenwick trees, 1-based: index v holds want v
	n        int64   // holders with a want above 0
	total    int64   // their wants' sum
}

// add adds (d = 1) or removes (d = -1) one want of v. A want above the
// trees' size grows them (doubling, so amortised O(log W)).
func (w *wants) add(v, d int) {
	if v <= 0 {
		return
	}
	if v >= len(w.cnt) {
		w.grow(v)
	}
	w.n += int64(d)
	w.total += int64(d * v)
	for i := v; i < len(w.cnt); i += i & -i {
		w.cnt[i] += int64(d)
		w.sum[i] += int64(d * v)
	}
}

// grow rebuilds the trees to hold wants up to at least v.
func (w *wants) grow(v int) {
	size := 1 << bits.Len(uint(v)) // a power of two above v
	old := w.values()
	w.cnt, w.sum = make([]int64, size+1), make([]int64, size+1)
	w.n, w.total = 0, 0
	for want, k := range old {
		for range k {
			w.add(want, 1)
		}
	}
}

// values returns the count of each want (O(W), for grow only).
func (w *wants) values() map[int]int64 {
	out := map[int]int64{}
	for v := 1; v < len(w.cnt); v++ {
		c := w.prefixCnt(v) - w.prefixCnt(v-1)
		if c > 0 {
			out[v] = c
		}
	}
	return out
}

func (w *wants) prefixCnt(v int) int64 {
	var c int64
	for i := v; i > 0; i -= i & -i {
		c += w.cnt[i]
	}
	return c
}

// level divides budget max-min fair among the wants (water-filling): every
// want of level or less is met in full, every larger one gets level, and
// leftover units (fewer than the wants above level) remain, which the
// ledger hands out one a holder and rotates. capped is false when the budget
// covers every want: then each holder's target is its want.
func (w *wants) level(budget int) (level, leftover int, capped bool) {
	b := int64(budget)
	if w.total <= b {
		return 0, budget - int(w.total), false
	}
	if w.n > b {
		return 0, budget, true // not one each: the units rotate
	}
	// The largest x with S(x) + (x+1)*(n - C(x)) <= budget, where C and S
	// count and sum the wants up to x; then level = x+1. The left side grows
	// with x, so a Fenwick descent finds it.
	pos := 0
	var c, s int64
	for step := highBit(len(w.cnt) - 1); step > 0; step >>= 1 {
		next := pos + step
		if next >= len(w.cnt) {
			continue
		}
		nc, ns := c+w.cnt[next], s+w.sum[next]
		if ns+int64(next+1)*(w.n-nc) <= b {
			pos, c, s = next, nc, ns
		}
	}
	level = pos + 1
	return level, int(b - (s + int64(level)*(w.n-c))), true
}

func highBit(n int) int {
	if n <= 0 {
		return 0
	}
	return 1 << (bits.Len(uint(n)) - 1)
}
