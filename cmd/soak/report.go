package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	fs "github.com/connactor/connactor/internal/testkit/faultserver"
)

// result is everything the report prints.
type result struct {
	cfg       config
	toxiproxy string // how the proxied routes ran
	proxied   int
	tally     *tally
	requests  int64
	elapsed   time.Duration

	peakTotal    int
	peakPerRoute int    // the highest per-route peak
	peakRoute    string // where it was
	dials        fs.DialerCounts
	atRest       bool
	rest         string       // Stats and sockets after the load
	base, after  fs.Resources // after: once back to base, or when the wait for it ran out
	chaosApplied map[string]int
	chaosErrors  int
	evictions    uint64
}

// check is one invariant's line.
type check struct {
	name, value string
	ok          bool
}

func (r *result) checks() []check {
	return []check{
		{"desyncs (a body naming another request)", fmt.Sprint(r.tally.desyncs), r.tally.desyncs == 0},
		{"untyped RoundTrip errors", fmt.Sprint(r.tally.untyped), r.tally.untyped == 0},
		{"clean direct requests that failed", fmt.Sprint(r.tally.cleanFailures), r.tally.cleanFailures == 0},
		{"socket peak, all routes", fmt.Sprintf("%d <= MaxConnsTotal %d", r.peakTotal, r.cfg.maxTotal), r.peakTotal <= r.cfg.maxTotal},
		{"socket peak, busiest route", fmt.Sprintf("%d <= MaxConnsPerRoute %d (%s)", r.peakPerRoute, r.cfg.maxPerRoute, r.peakRoute),
			r.peakPerRoute <= r.cfg.maxPerRoute},
		{"at rest after the load", r.rest, r.atRest},
		{"descriptors after Close", fmt.Sprintf("%d (baseline %d)", r.after.FDs, r.base.FDs), r.after.FDs <= r.base.FDs},
		{"goroutines after Close", fmt.Sprintf("%d (baseline %d)", r.after.Goroutines, r.base.Goroutines), r.after.Goroutines <= r.base.Goroutines},
	}
}

// ok reports whether every invariant held.
func (r *result) ok() bool {
	for _, c := range r.checks() {
		if !c.ok {
			return false
		}
	}
	return true
}

// print writes the one-screen report.
func (r *result) print(w io.Writer) {
	c := r.cfg
	rate := float64(r.requests) / r.elapsed.Seconds()
	fmt.Fprintf(w, "connactor soak: %d requests in %v (%.0f req/s), seed %d\n", r.requests, r.elapsed.Round(time.Millisecond), rate, c.seed)
	fmt.Fprintf(w, "  %d routes (distinct 127.0.0.1 listeners): %d direct, %d through toxiproxy (%s)\n",
		c.routes, c.routes-r.proxied, r.proxied, r.toxiproxy)
	fmt.Fprintf(w, "  %d callers; MaxConnsPerRoute %d, MaxConnsTotal %d (routes could use %d); %.1f%% cancelled, %.1f%% bodies closed early\n",
		c.callers, c.maxPerRoute, c.maxTotal, c.routes*c.maxPerRoute, 100*c.cancelRate, 100*c.earlyCloseRate)
	fmt.Fprintf(w, "  sockets: %d dialed, %d closed, %d dials failed; %d LRU evictions; chaos toxics %v (%d API errors)\n",
		r.dials.Dialed, r.dials.Closed, r.dials.Failed, r.evictions, fmtMap(r.chaosApplied), r.chaosErrors)
	fmt.Fprintln(w, "outcomes:")
	keys := slices.SortedFunc(maps.Keys(r.tally.outcomes), func(a, b string) int {
		return cmp.Or(cmp.Compare(r.tally.outcomes[b], r.tally.outcomes[a]), strings.Compare(a, b))
	})
	const maxLines = 14
	for i, k := range keys {
		if i == maxLines {
			rest := int64(0)
			for _, k := range keys[maxLines:] {
				rest += r.tally.outcomes[k]
			}
			fmt.Fprintf(w, "  %9d  (%d other kinds)\n", rest, len(keys)-maxLines)
			break
		}
		fmt.Fprintf(w, "  %9d  %s\n", r.tally.outcomes[k], k)
	}
	fmt.Fprintln(w, "invariants:")
	for _, ch := range r.checks() {
		mark := "ok  "
		if !ch.ok {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s  %-42s %s\n", mark, ch.name, ch.value)
	}
	for _, kind := range slices.Sorted(maps.Keys(r.tally.examples)) {
		for _, e := range r.tally.examples[kind] {
			fmt.Fprintf(w, "  e.g. %s\n", e)
		}
	}
	if r.ok() {
		fmt.Fprintln(w, "RESULT: PASS")
	} else {
		fmt.Fprintln(w, "RESULT: FAIL")
	}
}

func fmtMap(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
