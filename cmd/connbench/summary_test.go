package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A sweep's line compares the clients over every stretch where net/http's
// curve is flat, not only the widest: a client flat at few callers and
// climbing at many must show it, whichever of net/http's flat stretches is
// widest.
func TestSweepComparesOverEveryFlatStretchOfNetHTTP(t *testing.T) {
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
	for _, w := range []string{"callers 1..4", "callers 16..64", "callers 256..1000 net/http 1.07x, connactor 1.60x"} {
		if !strings.Contains(sum, w) {
			t.Errorf("summary lacks %q:\n%s", w, sum)
		}
	}
	if strings.Contains(sum, "met") {
		t.Errorf("a sweep is no target: its line judges nothing:\n%s", sum)
	}

	// net/http flat nowhere: no range to compare over.
	s.points[kindNetHTTP] = pts(xs, 10, 20, 40, 80, 160, 320)
	if sum := s.summary(); !strings.HasSuffix(sum, "net/http's curve is flat nowhere") {
		t.Errorf("summary should say net/http is flat nowhere:\n%s", sum)
	}
}

// cell builds the results of one cell on the fasthttp server from each
// client's figures.
func cell(scenario string, figs map[string]figs) []*Result {
	var rs []*Result
	for _, kind := range append(allClients, h2Clients...) {
		f, ok := figs[kind]
		if !ok {
			continue
		}
		r := &Result{Server: serverFasthttp, Scenario: scenario, Client: kind, Requests: 1000, RPS: f.rps,
			CPUusPerReq: f.cpu, P999us: f.p999, Dials: 16, DialsPerKReq: 16}
		if f.sw >= 0 {
			r.CtxSwitchesPerReq = &f.sw
		}
		if f.lock >= 0 {
			r.LockWaitUsPerReq = &f.lock
		}
		rs = append(rs, r)
	}
	return rs
}

// figs are one client's figures in a cell; sw or lock < 0: not recorded.
type figs struct{ rps, cpu, p999, sw, lock float64 }

// without returns m less the given clients.
func without(m map[string]figs, kinds ...string) map[string]figs {
	out := map[string]figs{}
	for k, v := range m {
		if !slices.Contains(kinds, k) {
			out[k] = v
		}
	}
	return out
}

// Each target applies to the cells it names and to no other: the HTTP/1.1
// targets to c16, c64, c256 and c64/16KiB on the fasthttp server, the tail
// to every cN cell there, HTTP/2 to its three cells on the go and nginx
// servers, churn and routes200 on every server.
func TestEachTargetAppliesToTheCellsItNames(t *testing.T) {
	applies := map[string][]string{} // target -> "server scenario"
	for _, srv := range everyServer {
		for _, sc := range allScenarios() {
			if !runsOn(sc, srv) {
				continue
			}
			for _, v := range cellTargets(srv, sc.Name, nil) {
				applies[v.target] = append(applies[v.target], srv+" "+sc.Name)
			}
		}
	}
	h1 := []string{"fasthttp c16/13B", "fasthttp c64/13B", "fasthttp c256/13B", "fasthttp c64/16KiB"}
	want := map[string][]string{
		"vs pool+std": h1, "vs net/http": h1, "lock wait": h1, "ctxsw": h1,
		"p99.9": {"fasthttp c1/13B", "fasthttp c16/13B", "fasthttp c64/13B", "fasthttp c256/13B",
			"fasthttp c1/16KiB", "fasthttp c16/16KiB", "fasthttp c64/16KiB", "fasthttp c256/16KiB"},
		"h2": {"go h2/c1/13B", "go h2/c64/13B", "go h2/c256/13B",
			"nginx h2/c1/13B", "nginx h2/c64/13B", "nginx h2/c256/13B"},
		"dialing": {"go routes200/13B", "go churn/13B", "fasthttp routes200/13B", "fasthttp churn/13B",
			"nginx routes200/13B", "nginx churn/13B"},
	}
	if len(applies) != len(want) {
		t.Errorf("targets applied: %v, want those of %v", applies, want)
	}
	for name, cells := range want {
		if !slices.Equal(applies[name], cells) {
			t.Errorf("%s applies to %v, want %v", name, applies[name], cells)
		}
	}
}

// The targets' rules say their thresholds as the targets are written.
func TestTheTargetsSayTheirThresholds(t *testing.T) {
	want := map[string]string{
		"vs pool+std": ">= 0.9x pool+std's req/s at <= 1.15x its CPU",
		"vs net/http": ">= 1.1x net/http's req/s at <= 0.9x its CPU",
		"lock wait":   "lock us/req below net/http's (or none)",
		"ctxsw":       "ctxsw/req <= net/http's",
		"h2":          ">= 1.0x net/http h2's req/s at <= 1.0x its CPU",
		"p99.9":       "p99.9 <= 1.2x net/http's",
		"dialing":     ">= 1.0x net/http's req/s at <= 1.0x its CPU",
	}
	for i := range targets {
		tg := &targets[i]
		if got := tg.rule(); got != want[tg.name] {
			t.Errorf("%s: rule %q, want %q", tg.name, got, want[tg.name])
		}
	}
	if len(targets) != len(want) {
		t.Errorf("%d targets, want %d", len(targets), len(want))
	}
}

// Given a cell's results, the summary judges each target that applies to it
// met or not met with connactor's figures, and not run (never met) when a
// client or a figure it needs is missing from the cell.
func TestSummaryJudgesEachTargetOfACellMetNotMetOrNotRun(t *testing.T) {
	std := map[string]figs{
		kindNetHTTP:   {rps: 40000, cpu: 24, p999: 10000, sw: 0.50, lock: 4.0},
		kindConnactor: {rps: 56000, cpu: 17, p999: 11000, sw: 0.55, lock: 0.2},
		kindFasthttp:  {rps: 60000, cpu: 12, p999: 8000, sw: 0.3, lock: 0.1},
		kindStdPool:   {rps: 60000, cpu: 15.5, p999: 9000, sw: 0.4, lock: 1},
	}
	h2 := map[string]figs{
		kindNetHTTPH2:      {rps: 32000, cpu: 22.3, sw: 1, lock: 1},
		kindConnactorH2:    {rps: 31300, cpu: 23.7, sw: 1, lock: 1},
		kindConnactorH1TLS: {rps: 43900, cpu: 20, sw: 1, lock: 1},
	}
	for _, tc := range []struct {
		name, server, scenario string
		figs                   map[string]figs
		want                   []string
	}{
		{"every HTTP/1.1 target judged", serverFasthttp, "c256/13B", std, []string{
			"vs pool+std 0.93x @ 1.10x met",
			"vs net/http 1.40x @ 0.71x met",
			"lock wait 0.20 us vs 4.00 us met",
			"ctxsw 0.55 vs 0.50 NOT MET",
			"p99.9 11000 us vs 10000 us = 1.10x met",
		}},
		{"each figure exactly at its threshold meets it", serverFasthttp, "c64/16KiB", map[string]figs{
			kindStdPool:   {rps: 110000, cpu: 180, p999: 1000, sw: 1, lock: 1},
			kindNetHTTP:   {rps: 90000, cpu: 230, p999: 7500, sw: 0.5, lock: 0},
			kindConnactor: {rps: 99000, cpu: 207, p999: 9000, sw: 0.5, lock: 0},
		}, []string{
			"vs pool+std 0.90x @ 1.15x met",
			"vs net/http 1.10x @ 0.90x met",
			"lock wait 0.00 us vs 0.00 us met",
			"ctxsw 0.50 vs 0.50 met",
			"p99.9 9000 us vs 7500 us = 1.20x met",
		}},
		{"just past each threshold misses it", serverFasthttp, "c16/13B", map[string]figs{
			kindStdPool:   {rps: 100000, cpu: 20, p999: 1000, sw: 1, lock: 1},
			kindNetHTTP:   {rps: 80000, cpu: 25, p999: 7400, sw: 0.49, lock: 0.1},
			kindConnactor: {rps: 89000, cpu: 23.2, p999: 9000, sw: 0.5, lock: 0.1},
		}, []string{
			"vs pool+std 0.89x @ 1.16x NOT MET",
			"vs net/http 1.11x @ 0.93x NOT MET",
			"lock wait 0.10 us vs 0.10 us NOT MET",
			"ctxsw 0.50 vs 0.49 NOT MET",
			"p99.9 9000 us vs 7400 us = 1.22x NOT MET",
		}},
		{"no pool+std in the run", serverFasthttp, "c64/13B", without(std, kindStdPool), []string{
			"vs pool+std not run (no pool+std)",
			"vs net/http 1.40x @ 0.71x met",
			"lock wait 0.20 us vs 4.00 us met",
			"ctxsw 0.55 vs 0.50 NOT MET",
			"p99.9 11000 us vs 10000 us = 1.10x met",
		}},
		{"no net/http in the run", serverFasthttp, "c64/13B", without(std, kindNetHTTP), []string{
			"vs pool+std 0.93x @ 1.10x met",
			"vs net/http not run (no net/http)",
			"lock wait not run (no net/http)",
			"ctxsw not run (no net/http)",
			"p99.9 not run (no net/http)",
		}},
		{"no connactor in the run", serverFasthttp, "c16/13B", without(std, kindConnactor), []string{
			"vs pool+std not run (no connactor)",
			"vs net/http not run (no connactor)",
			"lock wait not run (no connactor)",
			"ctxsw not run (no connactor)",
			"p99.9 not run (no connactor)",
		}},
		{"a run saved before the hand-offs were recorded", serverFasthttp, "c16/13B", map[string]figs{
			kindNetHTTP:   {rps: 50000, cpu: 19.4, p999: 5000, sw: -1, lock: -1},
			kindConnactor: {rps: 59700, cpu: 16.5, p999: 5500, sw: -1, lock: 0.3},
			kindStdPool:   {rps: 71000, cpu: 13.8, p999: 4000, sw: -1, lock: -1},
		}, []string{
			"vs pool+std 0.84x @ 1.20x NOT MET",
			"vs net/http 1.19x @ 0.85x met",
			"lock wait not run (no lock us/req of net/http)",
			"ctxsw not run (no ctxsw/req of connactor, no ctxsw/req of net/http)",
			"p99.9 5500 us vs 5000 us = 1.10x met",
		}},
		{"a cell with one caller judges the tail only", serverFasthttp, "c1/16KiB", std, []string{
			"p99.9 11000 us vs 10000 us = 1.10x met",
		}},
		{"no p99.9 of net/http", serverFasthttp, "c1/13B", map[string]figs{
			kindNetHTTP:   {rps: 1, cpu: 1},
			kindConnactor: {rps: 1, cpu: 1, p999: 100},
		}, []string{"p99.9 not run (no p99.9 of net/http)"}},
		{"HTTP/1.1 targets are read on the fasthttp server", serverGo, "c64/13B", std, nil},
		{"churn", serverFasthttp, "churn/13B", std, []string{"dialing 1.40x @ 0.71x met"}},
		{"routes200 on the nginx server", serverNginx, "routes200/13B", map[string]figs{
			kindNetHTTP:   {rps: 13000, cpu: 82, sw: -1, lock: -1},
			kindConnactor: {rps: 11700, cpu: 88, sw: -1, lock: -1},
		}, []string{"dialing 0.90x @ 1.07x NOT MET"}},
		{"routes200 without net/http", serverGo, "routes200/13B", without(std, kindNetHTTP),
			[]string{"dialing not run (no net/http)"}},
		{"routes200open128 is no target", serverFasthttp, "routes200open128/13B", std, nil},
		{"contended1000 is no target", serverFasthttp, "contended1000/13B", std, nil},
		{"HTTP/2 on the go server", serverGo, "h2/c64/13B", h2, []string{"h2 0.98x @ 1.06x NOT MET"}},
		{"HTTP/2 on the nginx server", serverNginx, "h2/c1/13B", map[string]figs{
			kindNetHTTPH2:   {rps: 10000, cpu: 50},
			kindConnactorH2: {rps: 10400, cpu: 49.5},
		}, []string{"h2 1.04x @ 0.99x met"}},
		{"HTTP/2 without connactor h2", serverNginx, "h2/c256/13B", without(h2, kindConnactorH2),
			[]string{"h2 not run (no connactor h2)"}},
		{"HTTP/2 without a CPU figure", serverGo, "h2/c256/13B", map[string]figs{
			kindNetHTTPH2:   {rps: 10000, cpu: 0},
			kindConnactorH2: {rps: 10400, cpu: 49.5},
		}, []string{"h2 not run (no CPU us/req of net/http h2)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := cell(tc.scenario, tc.figs)
			var got []string
			for _, v := range cellTargets(tc.server, tc.scenario, rs) {
				got = append(got, v.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s %s: verdicts\n  %s\nwant\n  %s", tc.server, tc.scenario,
					strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// A cell where connactor did not run still prints its line, every target
// of it not run; and over the run such a target is not run, never met.
func TestACellWithoutConnactorSaysItsTargetsWereNotRun(t *testing.T) {
	rep := &report{}
	for _, r := range cell("c64/13B", map[string]figs{
		kindNetHTTP: {rps: 40000, cpu: 24, p999: 10000, sw: 0.5, lock: 4},
		kindStdPool: {rps: 60000, cpu: 15.5, p999: 9000, sw: 0.4, lock: 1},
	}) {
		rep.Results = append(rep.Results, *r)
	}
	var b strings.Builder
	rep.writeSummary(&b)
	out := b.String()
	for _, want := range []string{
		"  fasthttp c64/13B            connactor against net/http: not run | targets: vs pool+std not run (no connactor);",
		"  vs pool+std  >= 0.9x pool+std's req/s at <= 1.15x its CPU       not run: met in 0 of 1 cells; not run in fasthttp c64/13B (no connactor)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if regexp.MustCompile(`(?m) met(:|;|$)`).MatchString(out) {
		t.Errorf("a target met where connactor did not run:\n%s", out)
	}
}

// The summary prints each cell's line with its verdicts, then each target
// once: met only if met in every cell of the run it applies to, naming the
// cells that missed it with their figures and those that could not judge it.
func TestSummaryTalliesEachTargetOverTheCells(t *testing.T) {
	rep := &report{}
	add := func(scenario string, c figs, pool bool) {
		fs := map[string]figs{
			kindNetHTTP:   {rps: 40000, cpu: 24, p999: 10000, sw: 0.5, lock: 4},
			kindConnactor: c,
		}
		if pool {
			fs[kindStdPool] = figs{rps: 60000, cpu: 15.5, p999: 9000, sw: 0.4, lock: 1}
		}
		for _, r := range cell(scenario, fs) {
			rep.Results = append(rep.Results, *r)
		}
	}
	add("c64/13B", figs{rps: 56000, cpu: 17, p999: 9000, sw: 0.4, lock: 0.2}, true)
	add("c256/13B", figs{rps: 56000, cpu: 18.6, p999: 9000, sw: 0.4, lock: 0.2}, true)
	add("c16/13B", figs{rps: 56000, cpu: 17, p999: 9000, sw: 0.4, lock: 0.2}, false)
	var b strings.Builder
	rep.writeSummary(&b)
	out := b.String()
	for _, want := range []string{
		"  fasthttp c64/13B            connactor: 1.40x req/s",
		"| targets: vs pool+std 0.93x @ 1.10x met; vs net/http 1.40x @ 0.71x met; lock wait 0.20 us vs 4.00 us met; ctxsw 0.40 vs 0.50 met; p99.9 9000 us vs 10000 us = 0.90x met\n",
		"Targets over the run (met only if met in every cell of the run it applies to):\n",
		"  vs pool+std  >= 0.9x pool+std's req/s at <= 1.15x its CPU       NOT MET: met in 1 of 3 cells; not in fasthttp c256/13B 0.93x @ 1.20x; not run in fasthttp c16/13B (no pool+std)\n",
		"  vs net/http  >= 1.1x net/http's req/s at <= 0.9x its CPU        met: met in 3 of 3 cells\n",
		"  ctxsw        ctxsw/req <= net/http's                            met: met in 3 of 3 cells\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// A run saved before context switches and lock waits were measured prints
// "-" for them, and its summary says those targets were not run.
func TestASavedRunWithoutHandOffFiguresStillRenders(t *testing.T) {
	old := `{"results": [
	  {"server": "fasthttp", "scenario": "c64/13B", "client": "nethttp", "callers": 64, "requests": 1000, "rps": 45000, "cpu_us_per_req": 23.8, "p999_us": 9000},
	  {"server": "fasthttp", "scenario": "c64/13B", "client": "connactor", "callers": 64, "requests": 1000, "rps": 55000, "cpu_us_per_req": 17.8, "p999_us": 9000}
	]}`
	var rep report
	if err := json.Unmarshal([]byte(old), &rep); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.writeTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"targets: vs pool+std not run (no pool+std); vs net/http 1.22x @ 0.75x met; lock wait not run (no lock us/req of connactor, no lock us/req of net/http);",
		"ctxsw        ctxsw/req <= net/http's                            not run: met in 0 of 1 cells",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary of a saved run lacks %q:\n%s", want, out)
		}
	}
}
