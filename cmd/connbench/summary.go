package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// The performance targets, checked per cell by the
// summary lines.
const (
	targetRPS         = 1.3  // c16, c64, c256: at least this x net/http's req/s
	targetCPU         = 0.75 // ... at most this x its CPU per request
	targetAllocs      = 0.5  // ... at most this x its allocations
	targetFasthttp    = 0.9  // c64/13B: at least this x fasthttp's req/s
	targetPoolCostUs  = 1.5  // c64: connactor's CPU minus pool+std's, at most (us/req)
	targetChurn       = 1.0  // routes200, churn: req/s at least, CPU and allocations at most, x net/http
	targetFlatSpread  = 1.2  // sweeps: connactor's max/min CPU per request over ...
	targetFlatNetHTTP = 1.2  // ... the range where net/http's is within this
)

// writeSummary prints one line per cell (server x scenario) with connactor's
// ratios, and the targets for that cell as met or not; then one line
// per sweep with how much each client's CPU per request varies along it.
func (r *report) writeSummary(w io.Writer) {
	type key struct{ server, scenario string }
	cells := map[key][]*Result{}
	var order []key
	for i := range r.Results {
		res := &r.Results[i]
		k := key{res.Server, res.Scenario}
		if _, ok := cells[k]; !ok {
			order = append(order, k)
		}
		cells[k] = append(cells[k], res)
	}
	fmt.Fprintln(w, "Summary (connactor against the others in the same cell; performance targets):")
	for _, k := range order {
		if line := summaryLine(k.server, k.scenario, cells[k]); line != "" {
			fmt.Fprintln(w, line)
		}
	}
	for _, s := range r.sweeps() {
		fmt.Fprintln(w, s.summary())
	}
	fmt.Fprintln(w)
}

func find(rs []*Result, kind string) *Result {
	for _, r := range rs {
		if r.Client == kind && r.Requests > 0 {
			return r
		}
	}
	return nil
}

func summaryLine(server, scenario string, rs []*Result) string {
	if strings.HasPrefix(scenario, "sweep/") {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  %-8s %-18s", server, scenario)
	var targets []string
	check := func(name string, ok bool) {
		verdict := "met"
		if !ok {
			verdict = "NOT MET"
		}
		targets = append(targets, name+" "+verdict)
	}
	if strings.HasPrefix(scenario, "h2/") {
		base := find(rs, kindNetHTTPH2)
		for _, kind := range []string{kindConnactorH2, kindConnactorH1TLS} {
			if c := find(rs, kind); c != nil && base != nil {
				fmt.Fprintf(&b, " %s: %.2fx req/s, %.2fx CPU, %.2fx allocs;", clientNames[kind],
					c.RPS/base.RPS, c.CPUusPerReq/base.CPUusPerReq, c.AllocsPerReq/base.AllocsPerReq)
			}
		}
		return strings.TrimSuffix(b.String(), ";") + " (of net/http h2)"
	}
	c, base := find(rs, kindConnactor), find(rs, kindNetHTTP)
	if c == nil || base == nil {
		return ""
	}
	rps, cpu, allocs := c.RPS/base.RPS, c.CPUusPerReq/base.CPUusPerReq, c.AllocsPerReq/base.AllocsPerReq
	fmt.Fprintf(&b, " connactor: %.2fx req/s, %.2fx CPU, %.2fx allocs of net/http", rps, cpu, allocs)
	if f := find(rs, kindFasthttp); f != nil {
		fmt.Fprintf(&b, "; %.2fx fasthttp's req/s", c.RPS/f.RPS)
	}
	pool := math.NaN()
	if p := find(rs, kindStdPool); p != nil {
		pool = c.CPUusPerReq - p.CPUusPerReq
		fmt.Fprintf(&b, "; pool cost %+.1f us/req", pool)
	}
	fmt.Fprintf(&b, "; dials %d (net/http %d)", c.Dials, base.Dials)
	callers := c.Callers
	switch {
	case strings.HasPrefix(scenario, "routes200") || strings.HasPrefix(scenario, "churn"):
		check("req/s>=1.0x", rps >= targetChurn)
		check("CPU<=1.0x", cpu <= targetChurn)
		check("allocs<=1.0x", allocs <= targetChurn)
	case strings.HasPrefix(scenario, "c") && (callers == 16 || callers == 64 || callers == 256):
		check("req/s>=1.3x", rps >= targetRPS)
		check("CPU<=0.75x", cpu <= targetCPU)
		check("allocs<=0.5x", allocs <= targetAllocs)
		if scenario == "c64/13B" {
			if f := find(rs, kindFasthttp); f != nil {
				check("fasthttp>=0.9x", c.RPS/f.RPS >= targetFasthttp)
			}
		}
		if callers == 64 && !math.IsNaN(pool) {
			check("pool<=1.5us", pool <= targetPoolCostUs)
		}
	}
	if len(targets) > 0 {
		fmt.Fprintf(&b, " | targets: %s", strings.Join(targets, ", "))
	}
	return b.String()
}

// sweep is one sweep's results on one server: per client, CPU per request
// against X.
type sweep struct {
	name, server string
	clients      []string
	points       map[string][]sweepPoint
}

type sweepPoint struct {
	x   int
	cpu float64
}

func (r *report) sweeps() []*sweep {
	var out []*sweep
	byKey := map[string]*sweep{}
	places := sweepPlaces()
	for _, res := range r.Results {
		at, ok := places[res.Scenario]
		if !ok || res.Requests == 0 {
			continue
		}
		k := at.Sweep + "/" + res.Server
		s := byKey[k]
		if s == nil {
			s = &sweep{name: at.Sweep, server: res.Server, points: map[string][]sweepPoint{}}
			byKey[k] = s
			out = append(out, s)
		}
		if _, ok := s.points[res.Client]; !ok {
			s.clients = append(s.clients, res.Client)
		}
		s.points[res.Client] = append(s.points[res.Client], sweepPoint{x: at.X, cpu: res.CPUusPerReq})
	}
	return out
}

// sweepPlaces maps each sweep scenario's name to its place on a chart: the
// sweep ("routes", "callers") and x.
func sweepPlaces() map[string]scenario {
	m := map[string]scenario{}
	for _, sc := range allScenarios() {
		if sc.Sweep != "" {
			m[sc.Name] = sc
		}
	}
	return m
}

// flatRanges returns every maximal range of consecutive points (in x) over
// which kind's CPU per request stays within targetFlatNetHTTP (max/min), at
// least two points wide, in order: the target applies over each of them, not
// only over the widest (net/http's curve may be flat at a few callers and
// again at many, with a climb between).
func (s *sweep) flatRanges(kind string) [][2]int {
	pts := slices.Clone(s.points[kind])
	slices.SortFunc(pts, func(a, b sweepPoint) int { return a.x - b.x })
	var out [][2]int
	end := -1 // the last point of the previous range: a range ending there is not maximal
	for i := range pts {
		mn, mx := pts[i].cpu, pts[i].cpu
		j := i
		for j+1 < len(pts) {
			n, x := min(mn, pts[j+1].cpu), max(mx, pts[j+1].cpu)
			if x/n > targetFlatNetHTTP {
				break
			}
			mn, mx, j = n, x, j+1
		}
		if j > i && j > end {
			out = append(out, [2]int{pts[i].x, pts[j].x})
			end = j
		}
	}
	return out
}

// ratio is max/min of kind's CPU per request over the points lo..hi.
func (s *sweep) ratio(kind string, lo, hi int) float64 {
	mn, mx := math.Inf(1), 0.0
	for _, p := range s.points[kind] {
		if p.x >= lo && p.x <= hi {
			mn, mx = min(mn, p.cpu), max(mx, p.cpu)
		}
	}
	return mx / mn
}

// spread is max/min of a client's CPU per request along the sweep.
func (s *sweep) spread(kind string) (lo, hi float64) {
	lo, hi = math.Inf(1), 0
	for _, p := range s.points[kind] {
		lo, hi = min(lo, p.cpu), max(hi, p.cpu)
	}
	return lo, hi
}

func (s *sweep) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-8s sweep/%-12s CPU us/req from least to most:", s.server, s.name)
	for _, kind := range s.clients {
		lo, hi := s.spread(kind)
		fmt.Fprintf(&b, " %s %.1f..%.1f (%.2fx);", clientNames[kind], lo, hi, hi/lo)
	}
	ranges := s.flatRanges(kindNetHTTP)
	if len(ranges) == 0 {
		fmt.Fprintf(&b, " target: net/http's curve is flat nowhere, none applies")
		return b.String()
	}
	verdict := "met"
	fmt.Fprintf(&b, " target (flat within 20%% where net/http is):")
	for _, r := range ranges {
		n := s.ratio(kindNetHTTP, r[0], r[1])
		c := s.ratio(kindConnactor, r[0], r[1])
		if c > targetFlatSpread {
			verdict = "NOT MET"
		}
		fmt.Fprintf(&b, " %s %d..%d net/http %.2fx, connactor %.2fx;", s.name, r[0], r[1], n, c)
	}
	fmt.Fprintf(&b, " %s", verdict)
	return b.String()
}
