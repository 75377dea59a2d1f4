package main

import "math/bits"

// histogram is a log-linear histogram of nanoseconds, HdrHistogram-like: exact
// below 64 ns, then 32 buckets per power of two (at most ~3% off).
type histogram struct {
	counts [histBuckets]uint32
	total  uint64
	sum    float64
}

const (
	histSubBits = 5
	histSub     = 1 << histSubBits // buckets per power of two
	histBuckets = 2*histSub + 40*histSub
)

func histIndex(v int64) int {
	if v < 2*histSub {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - histSubBits - 1 // v>>e is in [histSub, 2*histSub)
	i := 2*histSub + (e-1)*histSub + int(v>>e) - histSub
	return min(i, histBuckets-1)
}

// histValue is the middle of bucket i.
func histValue(i int) int64 {
	if i < 2*histSub {
		return int64(i)
	}
	e := (i-2*histSub)/histSub + 1
	m := int64((i-2*histSub)%histSub + histSub)
	return m<<e + (int64(1)<<e)/2
}

func (h *histogram) record(v int64) {
	h.counts[histIndex(v)]++
	h.total++
	h.sum += float64(v)
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.sum += o.sum
}

// quantile returns the value at quantile q (0..1): the middle of the bucket
// holding the ceil(q*total)-th smallest value.
func (h *histogram) quantile(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q*float64(h.total) + 0.999999)
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, c := range h.counts {
		seen += uint64(c)
		if seen >= rank {
			return histValue(i)
		}
	}
	return histValue(histBuckets - 1)
}

func (h *histogram) mean() float64 {
	if h.total == 0 {
		return 0
	}
	return h.sum / float64(h.total)
}
