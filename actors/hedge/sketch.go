package hedge

import (
	"math"
	"math/bits"
	"time"
)

// Sketch measures a route's latency: a log-linear histogram over a sliding
// window, small enough for every route actor to hold one (1.4 KB) and cheap
// on every sample (an index from the duration's bits and an increment: no
// allocation, about 40 ns on a shared 2-core machine, most of it reading
// the time).
//
// Why this and not another sketch. The hedge delay wants one quantile (p95,
// say) of the last few seconds, read often, with a bounded relative error;
// the order of samples does not matter. A histogram with buckets whose width
// grows with their value (HdrHistogram's layout: each power of two cut into
// eight equal buckets) bounds the relative error of any quantile to 1/16,
// whatever the distribution, with fixed memory and no allocation; merging
// two is adding counts. Sample-keeping sketches (t-digest, KLL) allocate or
// compact; a decaying histogram weighs samples by age, so its answer depends
// on the request rate as well as on the latency. A window of two halves
// counts exactly: a quantile covers the samples of the last SketchWindow/2
// to SketchWindow (the half being filled and the one before it), and a
// route that went quiet forgets its latency within SketchWindow.
//
// Error bound: Quantile returns the middle of the bucket holding the sample
// of the quantile's rank, so it is within 1/16 (6.25%) of that sample, for
// samples within [SketchMin, SketchMax). Faster samples count as SketchMin,
// slower ones as the last bucket.
//
// The zero value is an empty sketch. It is not safe for concurrent use.
type Sketch struct {
	counts [2][sketchBuckets]uint32 // two halves of the window
	n      [2]uint32                // samples in each half
	cur    uint8                    // the half being filled
	epoch  int64                    // the half-window cur fills: unix nanoseconds / (SketchWindow/2)
}

// SketchWindow is the span a Sketch covers (its oldest half ends between
// SketchWindow/2 and SketchWindow ago).
const SketchWindow = 10 * time.Second

const (
	sketchSubBits = 3 // 8 buckets per power of two: relative error 1/16
	sketchSub     = 1 << sketchSubBits
	sketchMinExp  = 14 // 2^14 ns, about 16 us
	sketchMaxExp  = 35 // the last power of two covered: 2^35 ns to 2^36 ns (34 s to 69 s)
	sketchBuckets = (sketchMaxExp - sketchMinExp + 1) * sketchSub
	sketchHalf    = int64(SketchWindow / 2)
)

// The range in which Sketch's error bound holds.
const (
	SketchMin = time.Duration(1) << sketchMinExp
	SketchMax = time.Duration(1) << (sketchMaxExp + 1)
)

// sketchIndex is the bucket of a duration: the position of its top bit
// gives the power of two, the three bits below it the eighth within it.
func sketchIndex(d time.Duration) int {
	v := uint64(max(d, SketchMin))
	if v >= uint64(SketchMax) {
		return sketchBuckets - 1
	}
	e := bits.Len64(v) - 1
	return (e-sketchMinExp)<<sketchSubBits | int(v>>(e-sketchSubBits))&(sketchSub-1)
}

// sketchMid is the middle of bucket i.
func sketchMid(i int) time.Duration {
	e := i>>sketchSubBits + sketchMinExp
	w := uint64(1) << (e - sketchSubBits)
	lo := uint64(sketchSub+i&(sketchSub-1)) * w
	return time.Duration(lo + w/2)
}

// Add records one sample d measured at now. Costs O(1), except when now
// starts a new half of the window (then the older half is cleared: 700
// bytes). A now earlier than the last one counts in the current half.
func (s *Sketch) Add(now time.Time, d time.Duration) {
	e := now.UnixNano() / sketchHalf
	switch {
	case e == s.epoch || e < s.epoch:
	case e == s.epoch+1:
		s.cur ^= 1
		s.counts[s.cur] = [sketchBuckets]uint32{}
		s.n[s.cur] = 0
		s.epoch = e
	default:
		s.counts = [2][sketchBuckets]uint32{}
		s.n = [2]uint32{}
		s.epoch = e
	}
	s.counts[s.cur][sketchIndex(d)]++
	s.n[s.cur]++
}

// live returns whether each half holds samples of the window ending at now.
func (s *Sketch) live(now time.Time) (cur, prev bool) {
	e := now.UnixNano() / sketchHalf
	return e <= s.epoch+1, e <= s.epoch
}

// Count returns the samples in the window at now.
func (s *Sketch) Count(now time.Time) int {
	cur, prev := s.live(now)
	n := 0
	if cur {
		n += int(s.n[s.cur])
	}
	if prev {
		n += int(s.n[s.cur^1])
	}
	return n
}

// MinSamples is how many samples Quantile wants before it answers for q:
// enough that at least two lie above the quantile, so one slow sample
// alone does not set a p95 (40 for 0.95, 200 for 0.99).
func MinSamples(q float64) int { return int(math.Ceil(2/(1-q) - 1e-9)) }

// rankOf is the rank of quantile q among n samples, ceil(q*n), at least 1:
// q*n is rounded first, as 0.07*100 is 7.000000000000001 in floating point.
func rankOf(q float64, n int) int {
	return max(1, int(math.Ceil(q*float64(n)-1e-9)))
}

// Quantile returns the latency at quantile q (in (0, 1)) of the samples in
// the window at now: the sample of rank ceil(q*n), within the error bound
// of Sketch. ok is false while the window holds fewer than MinSamples(q).
// Costs a pass over the buckets (176: about 0.3 us), no allocation; it
// changes nothing. A route that hedges often can keep the answer for a
// while (the window moves by halves of 5 s).
func (s *Sketch) Quantile(now time.Time, q float64) (d time.Duration, ok bool) {
	n := s.Count(now)
	if n == 0 || n < MinSamples(q) {
		return 0, false
	}
	rank := uint32(rankOf(q, n))
	a := &s.counts[s.cur]
	b := &s.counts[s.cur^1]
	cur, prev := s.live(now)
	var sum uint32
	for i := range sketchBuckets {
		if cur {
			sum += a[i]
		}
		if prev {
			sum += b[i]
		}
		if sum >= rank {
			return sketchMid(i), true
		}
	}
	panic("hedge: internal error: sketch counts short of their total")
}
