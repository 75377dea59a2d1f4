package hedge

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// t0 is a fixed start, at the beginning of a half-window.
var t0 = time.Unix(1_800_000_000, 0)

func TestSketchBucketsHoldTheirValuesWithinOneSixteenth(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	prev := -1
	for d := SketchMin; d < SketchMax; d += d/97 + 1 { // every bucket, several times each, in order
		i := sketchIndex(d)
		if i < prev || i >= sketchBuckets {
			t.Fatalf("index(%v) = %d after %d: not monotonic or out of range", d, i, prev)
		}
		prev = i
		if err := relErr(sketchMid(i), d); err > 1.0/16 {
			t.Fatalf("%v lands in bucket %d whose middle is %v: error %.4f > 1/16", d, i, sketchMid(i), err)
		}
	}
	if prev != sketchBuckets-1 {
		t.Fatalf("the last value in range lands in bucket %d, want the last (%d)", prev, sketchBuckets-1)
	}
	for range 10000 {
		d := SketchMin + time.Duration(rnd.Int64N(int64(SketchMax-SketchMin)))
		if err := relErr(sketchMid(sketchIndex(d)), d); err > 1.0/16 {
			t.Fatalf("%v: error %.4f > 1/16", d, err)
		}
	}
}

func TestSketchClampsValuesOutsideItsRange(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{0, 0}, {-time.Second, 0}, {time.Microsecond, 0}, {SketchMin, 0},
		{SketchMax - 1, sketchBuckets - 1}, {SketchMax, sketchBuckets - 1}, {time.Hour, sketchBuckets - 1},
	} {
		if got := sketchIndex(tc.d); got != tc.want {
			t.Errorf("index(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func relErr(got, want time.Duration) float64 {
	return float64(max(got-want, want-got)) / float64(want)
}

// exact is the sample of rank ceil(q*n), the quantile Sketch estimates.
func exact(samples []time.Duration, q float64) time.Duration {
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := max(1, int(float64(len(s))*q+0.999999999))
	return s[rank-1]
}

func TestSketchQuantilesAreWithinTheBoundOfTheExactOnes(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	dists := []struct {
		name string
		draw func() time.Duration
	}{
		{"uniform 1 to 10 ms", func() time.Duration { return time.Millisecond + time.Duration(rnd.Int64N(int64(9*time.Millisecond))) }},
		{"lognormal around 2 ms", func() time.Duration {
			return time.Duration(float64(2*time.Millisecond) * math.Exp(rnd.NormFloat64()*0.8))
		}},
		{"1 ms with 2% stalled 200 ms", func() time.Duration {
			if rnd.Float64() < 0.02 {
				return 200*time.Millisecond + time.Duration(rnd.Int64N(int64(time.Millisecond)))
			}
			return 900*time.Microsecond + time.Duration(rnd.Int64N(int64(200*time.Microsecond)))
		}},
		{"exponential, mean 5 ms", func() time.Duration { return time.Duration(rnd.ExpFloat64() * float64(5*time.Millisecond)) }},
	}
	for _, dist := range dists {
		t.Run(dist.name, func(t *testing.T) {
			var s Sketch
			var samples []time.Duration
			for i := range 5000 {
				d := max(dist.draw(), SketchMin) // the bound holds in range
				samples = append(samples, d)
				s.Add(t0.Add(time.Duration(i)*time.Millisecond), d) // all within one half
			}
			now := t0.Add(5 * time.Second)
			for _, q := range []float64{0.5, 0.9, 0.95, 0.99, 0.999} {
				got, ok := s.Quantile(now.Add(-time.Nanosecond), q)
				if !ok {
					t.Fatalf("q%v: no answer from 5000 samples", q)
				}
				if want := exact(samples, q); relErr(got, want) > 1.0/16 {
					t.Errorf("q%v = %v, exact %v: error %.4f > 1/16", q, got, want, relErr(got, want))
				}
			}
		})
	}
}

func TestSketchWindowKeepsTheLastHalfAndForgetsOlderSamples(t *testing.T) {
	half := SketchWindow / 2
	var s Sketch
	for i := range 100 {
		s.Add(t0.Add(time.Duration(i)*time.Millisecond), time.Millisecond) // first half: 1 ms
	}
	for i := range 100 {
		s.Add(t0.Add(half+time.Duration(i)*time.Millisecond), 100*time.Millisecond) // second half: 100 ms
	}
	for _, tc := range []struct {
		name   string
		at     time.Duration // after t0
		count  int
		median time.Duration // 0 = no answer
	}{
		{"in the second half, both count", half + time.Second, 200, time.Millisecond},
		{"at the end of the second half", 2*half - 1, 200, time.Millisecond},
		{"a half later, only the second half counts", 2 * half, 100, 100 * time.Millisecond},
		{"two halves later, nothing", 3 * half, 0, 0},
		{"long after, nothing", time.Hour, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(tc.at)
			if got := s.Count(now); got != tc.count {
				t.Fatalf("Count = %d, want %d", got, tc.count)
			}
			got, ok := s.Quantile(now, 0.5)
			if tc.median == 0 {
				if ok {
					t.Fatalf("Quantile = %v, want no answer", got)
				}
				return
			}
			if !ok || relErr(got, tc.median) > 1.0/16 {
				t.Fatalf("median = %v (%v), want about %v", got, ok, tc.median)
			}
		})
	}
	// A sample two halves after the last one starts afresh.
	s.Add(t0.Add(3*half), 7*time.Millisecond)
	if got := s.Count(t0.Add(3 * half)); got != 1 {
		t.Fatalf("after a gap, Count = %d, want 1", got)
	}
}

func TestSketchAnswersOnlyWithEnoughSamples(t *testing.T) {
	for _, tc := range []struct {
		q    float64
		want int
	}{{0.5, 4}, {0.9, 20}, {0.95, 40}, {0.99, 200}, {0.999, 2000}} {
		if got := MinSamples(tc.q); got != tc.want {
			t.Errorf("MinSamples(%v) = %d, want %d", tc.q, got, tc.want)
		}
	}
	var s Sketch
	for i := range 39 {
		s.Add(t0, time.Duration(i+1)*time.Millisecond)
	}
	if d, ok := s.Quantile(t0, 0.95); ok {
		t.Fatalf("39 samples: p95 = %v, want no answer", d)
	}
	s.Add(t0, 40*time.Millisecond)
	if d, ok := s.Quantile(t0, 0.95); !ok || relErr(d, 38*time.Millisecond) > 1.0/16 {
		t.Fatalf("40 samples: p95 = %v (%v), want about 38ms", d, ok)
	}
}

func TestSketchAllocatesNothing(t *testing.T) {
	var s Sketch
	now := t0
	if n := testing.AllocsPerRun(1000, func() {
		now = now.Add(7 * time.Millisecond)
		s.Add(now, 3*time.Millisecond)
		s.Quantile(now, 0.95)
	}); n != 0 {
		t.Fatalf("Add and Quantile allocate %v times a run", n)
	}
}

func BenchmarkSketchAdd(b *testing.B) {
	var s Sketch
	rnd := rand.New(rand.NewPCG(5, 6))
	ds := make([]time.Duration, 1024)
	for i := range ds {
		ds[i] = time.Duration(rnd.ExpFloat64() * float64(5*time.Millisecond))
	}
	now := t0
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Microsecond)
		s.Add(now, ds[i&1023])
	}
}

func BenchmarkSketchQuantile(b *testing.B) {
	var s Sketch
	rnd := rand.New(rand.NewPCG(7, 8))
	for range 10000 {
		s.Add(t0, time.Duration(rnd.ExpFloat64()*float64(5*time.Millisecond)))
	}
	for b.Loop() {
		s.Quantile(t0, 0.95)
	}
}

func TestRankIsTheCeilingOfQTimesNDespiteRounding(t *testing.T) {
	for _, tc := range []struct {
		q    float64
		n    int
		want int
	}{{0.95, 40, 38}, {0.9, 10, 9}, {0.5, 4, 2}, {0.999, 1000, 999}, {0.99, 200, 198}, {0.95, 41, 39}, {0.01, 10, 1}, {0.07, 100, 7}, {0.07, 300, 21}} {
		if got := rankOf(tc.q, tc.n); got != tc.want {
			t.Errorf("rank of q%v among %d = %d, want %d", tc.q, tc.n, got, tc.want)
		}
	}
}
