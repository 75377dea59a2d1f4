package main

import (
	"bytes"
	"encoding/json"
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

// cell builds the results of one cell from each client's figures.
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

// figs are one client's figures in a cell; sw or lock < 0: not measured.
type figs struct{ rps, cpu, p999, sw, lock float64 }

func verdicts(vs []verdict) map[string]verdict {
	m := map[string]verdict{}
	for _, v := range vs {
		m[v.target] = v
	}
	return m
}

// Each cell is judged against the targets that apply to it, each target
// with connactor's figure: the hand-offs in every cN cell; the pool cost,
// throughput and CPU at c16, c64 and c256; fasthttp's throughput at
// c64/13B; the tail at c256; throughput and CPU in churn/13B and
// routes200/13B; connactor h2 against net/http h2.
func TestSummaryJudgesTheTargetsOfEachCellWithTheirFigures(t *testing.T) {
	std := map[string]figs{
		kindNetHTTP:   {rps: 40000, cpu: 24, p999: 10000, sw: 0.50, lock: 4.0},
		kindConnactor: {rps: 56000, cpu: 17, p999: 11000, sw: 0.55, lock: 0.2},
		kindFasthttp:  {rps: 60000, cpu: 12, p999: 8000, sw: 0.3, lock: 0.1},
		kindStdPool:   {rps: 60000, cpu: 15.5, p999: 9000, sw: 0.4, lock: 1},
	}
	for _, tc := range []struct {
		scenario string
		figs     map[string]figs
		want     map[string]string // target -> "figure verdict"
	}{
		{"c256/13B", std, map[string]string{
			"ctxsw<=net/http":    "0.55 vs 0.50 NOT MET",
			"lock wait<net/http": "0.20 vs 4.00 us met",
			"pool<=2.0us":        "+1.5us met",
			"req/s>=1.3x":        "1.40x met",
			"CPU<=0.75x":         "0.71x met",
			"p99.9<=1.2x":        "1.10x met",
		}},
		{"c64/13B", std, map[string]string{
			"ctxsw<=net/http": "0.55 vs 0.50 NOT MET", "lock wait<net/http": "0.20 vs 4.00 us met",
			"pool<=2.0us": "+1.5us met", "req/s>=1.3x": "1.40x met", "CPU<=0.75x": "0.71x met",
			"fasthttp>=0.9x": "0.93x met",
		}},
		{"c1/16KiB", std, map[string]string{
			"ctxsw<=net/http": "0.55 vs 0.50 NOT MET", "lock wait<net/http": "0.20 vs 4.00 us met",
		}},
		{"churn/13B", std, map[string]string{"req/s>=1.0x": "1.40x met", "CPU<=1.0x": "0.71x met"}},
		{"routes200/13B", map[string]figs{
			kindNetHTTP:   {rps: 13000, cpu: 82, sw: -1, lock: -1},
			kindConnactor: {rps: 11700, cpu: 88, sw: -1, lock: -1},
		}, map[string]string{"req/s>=1.0x": "0.90x NOT MET", "CPU<=1.0x": "1.07x NOT MET"}},
		{"routes200open128/13B", std, map[string]string{}},
		{"contended1000/13B", std, map[string]string{}},
		// A run saved before the hand-offs were measured: those targets are
		// left out, the others judged.
		{"c16/13B", map[string]figs{
			kindNetHTTP:   {rps: 50000, cpu: 19.4, sw: -1, lock: -1},
			kindConnactor: {rps: 59700, cpu: 16.5, sw: -1, lock: -1},
			kindStdPool:   {rps: 71000, cpu: 13.8, sw: -1, lock: -1},
		}, map[string]string{"pool<=2.0us": "+2.7us NOT MET", "req/s>=1.3x": "1.19x NOT MET", "CPU<=0.75x": "0.85x NOT MET"}},
		{"h2/c64/13B", map[string]figs{
			kindNetHTTPH2:      {rps: 32000, cpu: 22.3, sw: 1, lock: 1},
			kindConnactorH2:    {rps: 31300, cpu: 23.7, sw: 1, lock: 1},
			kindConnactorH1TLS: {rps: 43900, cpu: 20, sw: 1, lock: 1},
		}, map[string]string{"h2 req/s>=1.0x": "0.98x NOT MET", "h2 CPU<=1.0x": "1.06x NOT MET"}},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			got := verdicts(cellTargets(tc.scenario, cell(tc.scenario, tc.figs)))
			if len(got) != len(tc.want) {
				t.Errorf("%d targets judged, want %d: %v", len(got), len(tc.want), got)
			}
			for target, want := range tc.want {
				v, ok := got[target]
				if !ok {
					t.Errorf("target %q not judged", target)
					continue
				}
				if s := v.got + " " + met(v.ok); s != want {
					t.Errorf("%s: %q, want %q", target, s, want)
				}
			}
		})
	}
}

// A lock wait of zero meets its target even when net/http's is zero too:
// there is nothing to be below.
func TestNoLockWaitAtAllMeetsTheLockTarget(t *testing.T) {
	rs := cell("c1/13B", map[string]figs{
		kindNetHTTP:   {rps: 1, cpu: 1, sw: 1, lock: 0},
		kindConnactor: {rps: 1, cpu: 1, sw: 1, lock: 0},
	})
	if v := verdicts(cellTargets("c1/13B", rs))["lock wait<net/http"]; !v.ok {
		t.Errorf("no lock wait at all: %v", v)
	}
}

// The summary prints each cell's line with its verdicts, then each target
// once: met only if met in every cell it applies to, naming the cells that
// missed it with their figures.
func TestSummaryTalliesEachTargetOverTheCells(t *testing.T) {
	rep := &report{}
	add := func(server, scenario string, c figs) {
		for _, r := range cell(scenario, map[string]figs{
			kindNetHTTP:   {rps: 40000, cpu: 24, p999: 10000, sw: 0.5, lock: 4},
			kindConnactor: c,
			kindStdPool:   {rps: 60000, cpu: 15.5, p999: 9000, sw: 0.4, lock: 1},
		}) {
			r.Server = server
			rep.Results = append(rep.Results, *r)
		}
	}
	add(serverGo, "c64/13B", figs{rps: 56000, cpu: 17, p999: 9000, sw: 0.4, lock: 0.2})
	add(serverNginx, "c64/13B", figs{rps: 56000, cpu: 18.6, p999: 9000, sw: 0.4, lock: 0.2})
	var b strings.Builder
	rep.writeSummary(&b)
	out := b.String()
	for _, want := range []string{
		"go       c64/13B",
		"| targets: ctxsw<=net/http 0.40 vs 0.50 met; lock wait<net/http 0.20 vs 4.00 us met; pool<=2.0us +1.5us met",
		"pool<=2.0us          NOT MET: met in 1 of 2 cells; not in nginx c64/13B +3.1us",
		"ctxsw<=net/http      met: met in 2 of 2 cells",
		"req/s>=1.3x          met: met in 2 of 2 cells",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// A run saved before context switches and lock waits were measured prints
// "-" for them, and its summary judges the other targets only.
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
	if !strings.Contains(out, "targets: req/s>=1.3x 1.22x NOT MET; CPU<=0.75x 0.75x met") {
		t.Errorf("summary of a saved run:\n%s", out)
	}
	if strings.Contains(out, "ctxsw<=net/http") {
		t.Errorf("a saved run without context switches judged them:\n%s", out)
	}
}
