package main

import (
	"slices"
	"time"

	"github.com/connactor/connactor/internal/testkit/benchkit"
)

// phaseStats sums up one phase of a run. Requests count in the phase in
// which they ended (success or failure).
type phaseStats struct {
	phase
	ok                int
	goodput, capacity float64       // successes a second; the server's k/service
	p50, p99, p999    time.Duration // of successes, arrival to body's end
	refusals          int
	refusedP99        time.Duration // of refusals, arrival to the error
	queueMean         float64       // the server's queue depth, sampled
	queueMax          int64
	wasted            int64 // answers the server wrote to callers already gone
	errors            map[string]int
}

func (r *run) phases() []phaseStats {
	out := make([]phaseStats, len(r.sch))
	for i, p := range r.sch {
		out[i] = phaseStats{phase: p, capacity: float64(r.k) / p.service.Seconds(), errors: map[string]int{}}
	}
	oks := make([][]time.Duration, len(r.sch))
	refusals := make([][]time.Duration, len(r.sch))
	for _, o := range r.outcomes {
		i := r.sch.at(o.done())
		switch {
		case o.class == "":
			oks[i] = append(oks[i], o.took)
		default:
			out[i].errors[o.class]++
			if refused(o.class) {
				refusals[i] = append(refusals[i], o.took)
			}
		}
	}
	for i := range out {
		ps := &out[i]
		ps.ok = len(oks[i])
		ps.goodput = float64(ps.ok) / ps.duration.Seconds()
		slices.Sort(oks[i])
		slices.Sort(refusals[i])
		ps.p50, ps.p99, ps.p999 = benchkit.Quantile(oks[i], 0.5), benchkit.Quantile(oks[i], 0.99), benchkit.Quantile(oks[i], 0.999)
		ps.refusals = len(refusals[i])
		ps.refusedP99 = benchkit.Quantile(refusals[i], 0.99)
	}
	var n = make([]int, len(r.sch))
	for j, s := range r.server {
		i := r.sch.at(s.t)
		out[i].queueMean += float64(s.queued)
		out[i].queueMax = max(out[i].queueMax, s.queued)
		n[i]++
		prev := serverCounts{}
		if j > 0 {
			prev = r.server[j-1].serverCounts
		}
		out[i].wasted += s.wasted - prev.wasted
	}
	for i := range out {
		if n[i] > 0 {
			out[i].queueMean /= float64(n[i])
		}
	}
	// Answers wasted after the last sample (the server draining its queue
	// once the callers were all gone) count in the last phase.
	if len(r.server) > 0 {
		out[len(out)-1].wasted += r.final.wasted - r.server[len(r.server)-1].wasted
	}
	return out
}

// bucket is one slice of a run's time line, for the chart.
type bucket struct {
	t        time.Duration // its start
	goodput  float64       // successes a second ending in it
	failures float64       // failures a second ending in it
	p99      time.Duration // of the successes ending in it
	queue    float64       // the server's mean queue depth in it
	samples  int           // of the server taken in it (0: queue unknown)
}

// timeline cuts the run into buckets of width.
func (r *run) timeline(width time.Duration) []bucket {
	n := int((r.sch.total() + width - 1) / width)
	bs := make([]bucket, n)
	lat := make([][]time.Duration, n)
	idx := func(t time.Duration) int { return max(0, min(n-1, int(t/width))) }
	for _, o := range r.outcomes {
		i := idx(o.done())
		if o.class == "" {
			bs[i].goodput++
			lat[i] = append(lat[i], o.took)
		} else {
			bs[i].failures++
		}
	}
	for _, s := range r.server {
		i := idx(s.t)
		bs[i].queue += float64(s.queued)
		bs[i].samples++
	}
	for i := range bs {
		bs[i].t = time.Duration(i) * width
		bs[i].goodput /= width.Seconds()
		bs[i].failures /= width.Seconds()
		slices.Sort(lat[i])
		bs[i].p99 = benchkit.Quantile(lat[i], 0.99)
		if bs[i].samples > 0 {
			bs[i].queue /= float64(bs[i].samples)
		}
	}
	return bs
}
