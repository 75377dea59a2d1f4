package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/connactor/connactor/internal/testkit/benchkit"
)

// writeReport prints one Markdown table of every run's phases, then the
// errors of each by class.
func writeReport(w io.Writer, runs []*run) {
	fmt.Fprintln(w, "| client | phase | goodput/s (offered / capacity) | p50 | p99 | p99.9 | refused (p99) | server queue mean/max | wasted answers | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		for _, ps := range r.phases() {
			fmt.Fprintf(w, "| %s | %s | %.0f (%.0f / %.0f) | %s | %s | %s | %d (%s) | %.1f / %d | %d | %s |\n",
				r.client, ps.name, ps.goodput, ps.rate, ps.capacity,
				ms(ps.p50), ms(ps.p99), ms(ps.p999), ps.refusals, ms(ps.refusedP99),
				ps.queueMean, ps.queueMax, ps.wasted, errorSummary(ps.errors))
		}
	}
	for _, r := range runs {
		fmt.Fprintf(w, "\n%s: %d callers refused by the client reached the server", r.client, r.refusedAtServer)
		if lim := r.limits(); lim != "" {
			fmt.Fprintf(w, "; %s", lim)
		}
		fmt.Fprintln(w, ".")
	}
	for _, r := range runs {
		if r.final.skipped > 0 {
			fmt.Fprintf(w, "\n%s: %d requests of callers long gone were still queued at the server when the run ended (skipped, not counted above).\n", r.client, r.final.skipped)
		}
	}
}

// limits summarizes the route's limit as sampled: its median and the
// server's mean holding (queued plus in service) in each phase, and how
// long after the slowdown's end the limit was back to its median of the
// first phase. "" for a client without a limit in its Stats.
func (r *run) limits() string {
	var parts []string
	first := -1
	for i, p := range r.sch {
		from, to := r.sch.start(i), r.sch.start(i)+p.duration
		var lims []int
		var held float64
		n := 0
		for _, s := range r.server {
			if s.t < from || s.t >= to || s.limit < 0 {
				continue
			}
			lims = append(lims, s.limit)
			held += float64(s.queued + s.inFlight)
			n++
		}
		if n == 0 {
			return ""
		}
		slices.Sort(lims)
		if first < 0 {
			first = lims[n/2]
		}
		parts = append(parts, fmt.Sprintf("%s limit %d (server holds %.1f)", p.name, lims[n/2], held/float64(n)))
	}
	back := "never"
	if last := len(r.sch) - 1; last > 0 {
		end := r.sch.start(last)
		for _, s := range r.server {
			if s.t >= end && s.limit >= first {
				back = ms(s.t - end)
				break
			}
		}
		parts = append(parts, fmt.Sprintf("limit back to %d %s after the slowdown", first, back))
	}
	return strings.Join(parts, ", ")
}

func errorSummary(errs map[string]int) string {
	if len(errs) == 0 {
		return "-"
	}
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(errs)) {
		parts = append(parts, fmt.Sprintf("%s %d", c, errs[c]))
	}
	return strings.Join(parts, ", ")
}

// ms formats d in milliseconds ("-" for none).
func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	if d < 10*time.Millisecond {
		return benchkit.Millis(d, 1)
	}
	return benchkit.Millis(d, 0)
}
