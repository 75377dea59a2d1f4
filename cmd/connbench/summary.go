package main

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The performance targets, checked per cell by the summary lines and tallied
// over the run after them.
const (
	// c16, c64, c256 (13 B and 16 KiB): connactor's CPU per request minus
	// pool+std's (a nearly free pool on the same parsing), in us, at most.
	targetPoolCostUs = 2.0
	targetRPS        = 1.3  // c16, c64, c256: at least this x net/http's req/s ...
	targetCPU        = 0.75 // ... at most this x its CPU per request
	targetFasthttp   = 0.9  // c64/13B: at least this x fasthttp's req/s
	// Every cN cell: context switches per request at most this x
	// net/http's, and lock waits per request below net/http's.
	targetSwitches = 1.0
	targetDials    = 1.0 // churn/13B and routes200/13B: req/s at least, CPU at most, x net/http
	targetTail     = 1.2 // c256: p99.9 latency at most this x net/http's
	targetH2       = 1.0 // h2 cells: connactor h2's req/s at least, CPU at most, x net/http h2's
)

// verdict is one target judged in one cell.
type verdict struct {
	target string // the target, named alike in every cell ("pool<=2.0us")
	got    string // connactor's figure, as the line prints it
	ok     bool
}

func (v verdict) String() string { return v.target + " " + v.got + " " + met(v.ok) }

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT MET"
}

// writeSummary prints one line per cell (server x scenario) with connactor's
// figures against the other clients' and the targets of that cell, each met
// or not with its figure; then, per target, in how many cells it was met;
// then one line per sweep with how much each client's CPU per request varies
// along it.
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
	var t tally
	for _, k := range order {
		line, vs := summaryLine(k.server, k.scenario, cells[k])
		if line != "" {
			fmt.Fprintln(w, line)
		}
		t.add(k.server, k.scenario, vs)
	}
	t.write(w)
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

// summaryLine returns a cell's line and its verdicts; "" for a sweep's cell,
// or when connactor or the client it is compared with did not run.
func summaryLine(server, scenario string, rs []*Result) (string, []verdict) {
	if strings.HasPrefix(scenario, "sweep/") {
		return "", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  %-8s %-18s", server, scenario)
	if strings.HasPrefix(scenario, "h2/") {
		base := find(rs, kindNetHTTPH2)
		if base == nil {
			return "", nil
		}
		for _, kind := range []string{kindConnactorH2, kindConnactorH1TLS} {
			if c := find(rs, kind); c != nil {
				fmt.Fprintf(&b, " %s: %.2fx req/s, %.2fx CPU, %.2fx allocs, %s ctxsw/req;", clientNames[kind],
					c.RPS/base.RPS, c.CPUusPerReq/base.CPUusPerReq, c.AllocsPerReq/base.AllocsPerReq,
					figure(c.CtxSwitchesPerReq))
			}
		}
		line := strings.TrimSuffix(b.String(), ";") + " (of net/http h2)"
		vs := cellTargets(scenario, rs)
		return withVerdicts(line, vs), vs
	}
	c, base := find(rs, kindConnactor), find(rs, kindNetHTTP)
	if c == nil || base == nil {
		return "", nil
	}
	fmt.Fprintf(&b, " connactor: %.2fx req/s, %.2fx CPU, %.2fx allocs of net/http",
		c.RPS/base.RPS, c.CPUusPerReq/base.CPUusPerReq, c.AllocsPerReq/base.AllocsPerReq)
	if f := find(rs, kindFasthttp); f != nil {
		fmt.Fprintf(&b, "; %.2fx fasthttp's req/s", c.RPS/f.RPS)
	}
	if p := find(rs, kindStdPool); p != nil {
		fmt.Fprintf(&b, "; pool cost %+.1f us/req", c.CPUusPerReq-p.CPUusPerReq)
	}
	fmt.Fprintf(&b, "; ctxsw/req %s (net/http %s), lock wait us/req %s (net/http %s)",
		figure(c.CtxSwitchesPerReq), figure(base.CtxSwitchesPerReq), figure(c.LockWaitUsPerReq), figure(base.LockWaitUsPerReq))
	fmt.Fprintf(&b, "; p99.9 %s us (net/http %s)", micros(c.P999us), micros(base.P999us))
	fmt.Fprintf(&b, "; dials %d (net/http %d), per 1k req %.0f (net/http %.0f)", c.Dials, base.Dials, c.DialsPerKReq, base.DialsPerKReq)
	vs := cellTargets(scenario, rs)
	return withVerdicts(b.String(), vs), vs
}

func withVerdicts(line string, vs []verdict) string {
	if len(vs) == 0 {
		return line
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return line + " | targets: " + strings.Join(parts, "; ")
}

// cellCallers matches the single-route cells "cN/<body>" and gives N.
var cellCallers = regexp.MustCompile(`^c(\d+)/`)

// cellTargets judges the targets that apply to a cell, from its results;
// a target whose figures are missing (a client that did not run, a run saved
// before a figure was measured) is left out.
func cellTargets(scenario string, rs []*Result) []verdict {
	var vs []verdict
	add := func(target string, ok bool, format string, args ...any) {
		vs = append(vs, verdict{target: target, got: fmt.Sprintf(format, args...), ok: ok})
	}
	if strings.HasPrefix(scenario, "h2/") {
		c, base := find(rs, kindConnactorH2), find(rs, kindNetHTTPH2)
		if c != nil && base != nil {
			rps, cpu := c.RPS/base.RPS, c.CPUusPerReq/base.CPUusPerReq
			add(fmt.Sprintf("h2 req/s>=%.1fx", targetH2), rps >= targetH2, "%.2fx", rps)
			add(fmt.Sprintf("h2 CPU<=%.1fx", targetH2), cpu <= targetH2, "%.2fx", cpu)
		}
		return vs
	}
	c, base := find(rs, kindConnactor), find(rs, kindNetHTTP)
	if c == nil || base == nil {
		return nil
	}
	rps, cpu := c.RPS/base.RPS, c.CPUusPerReq/base.CPUusPerReq
	if scenario == "churn/13B" || scenario == "routes200/13B" {
		add(fmt.Sprintf("req/s>=%.1fx", targetDials), rps >= targetDials, "%.2fx", rps)
		add(fmt.Sprintf("CPU<=%.1fx", targetDials), cpu <= targetDials, "%.2fx", cpu)
		return vs
	}
	m := cellCallers.FindStringSubmatch(scenario)
	if m == nil {
		return nil
	}
	callers, _ := strconv.Atoi(m[1])
	if c.CtxSwitchesPerReq != nil && base.CtxSwitchesPerReq != nil {
		sw, nsw := *c.CtxSwitchesPerReq, *base.CtxSwitchesPerReq
		add("ctxsw<=net/http", sw <= nsw*targetSwitches, "%.2f vs %.2f", sw, nsw)
	}
	if c.LockWaitUsPerReq != nil && base.LockWaitUsPerReq != nil {
		lw, nlw := *c.LockWaitUsPerReq, *base.LockWaitUsPerReq
		add("lock wait<net/http", lw < nlw || lw == 0, "%.2f vs %.2f us", lw, nlw)
	}
	if callers != 16 && callers != 64 && callers != 256 {
		return vs
	}
	if p := find(rs, kindStdPool); p != nil {
		pool := c.CPUusPerReq - p.CPUusPerReq
		add(fmt.Sprintf("pool<=%.1fus", targetPoolCostUs), pool <= targetPoolCostUs, "%+.1fus", pool)
	}
	add(fmt.Sprintf("req/s>=%.1fx", targetRPS), rps >= targetRPS, "%.2fx", rps)
	add(fmt.Sprintf("CPU<=%.2fx", targetCPU), cpu <= targetCPU, "%.2fx", cpu)
	if f := find(rs, kindFasthttp); f != nil && scenario == "c64/13B" {
		x := c.RPS / f.RPS
		add(fmt.Sprintf("fasthttp>=%.1fx", targetFasthttp), x >= targetFasthttp, "%.2fx", x)
	}
	if callers == 256 && base.P999us > 0 {
		x := c.P999us / base.P999us
		add(fmt.Sprintf("p99.9<=%.1fx", targetTail), x <= targetTail, "%.2fx", x)
	}
	return vs
}

// tally counts, per target, the cells it was judged in and those where it
// was met, in the order the targets first appear.
type tally struct {
	order []string
	cells map[string]*targetCells
}

type targetCells struct {
	judged int
	missed []string // "server scenario figure" of each cell where it was not met
}

func (t *tally) add(server, scenario string, vs []verdict) {
	for _, v := range vs {
		if t.cells == nil {
			t.cells = map[string]*targetCells{}
		}
		tc := t.cells[v.target]
		if tc == nil {
			tc = &targetCells{}
			t.cells[v.target] = tc
			t.order = append(t.order, v.target)
		}
		tc.judged++
		if !v.ok {
			tc.missed = append(tc.missed, server+" "+scenario+" "+v.got)
		}
	}
}

// write prints one line per target: met when it was met in every cell it
// applies to, with the cells that missed it.
func (t *tally) write(w io.Writer) {
	if len(t.order) == 0 {
		return
	}
	fmt.Fprintln(w, "Targets over the run (met only if met in every cell it applies to):")
	for _, name := range t.order {
		tc := t.cells[name]
		fmt.Fprintf(w, "  %-20s %s: met in %d of %d cells", name, met(len(tc.missed) == 0), tc.judged-len(tc.missed), tc.judged)
		if len(tc.missed) > 0 {
			fmt.Fprintf(w, "; not in %s", strings.Join(tc.missed, ", "))
		}
		fmt.Fprintln(w)
	}
}

// sweep is one sweep's results on one server: per client, CPU per request
// against X.
type sweep struct {
	name, server string
	clients      []string
	points       map[string][]sweepPoint
}

type sweepPoint struct {
	x    int
	cpu  float64
	heap float64 // bytes per route (the routes sweep); 0 = not measured
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
		s.points[res.Client] = append(s.points[res.Client], sweepPoint{x: at.X, cpu: res.CPUusPerReq, heap: res.HeapPerRoute})
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

// flatWithin is how much (max/min) a curve may vary over a range of a sweep
// and still count as flat there.
const flatWithin = 1.2

// flatRanges returns every maximal range of consecutive points (in x) over
// which kind's CPU per request stays within flatWithin (max/min), at least
// two points wide, in order: a sweep's line compares the clients over each of
// them, not only over the widest (net/http's curve may be flat at a few
// callers and again at many, with a climb between).
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
			if x/n > flatWithin {
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

// summary is the sweep's line: each client's least and most CPU per request,
// and how much connactor's varies over each range where net/http's is flat.
func (s *sweep) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-8s sweep/%-12s CPU us/req from least to most:", s.server, s.name)
	for _, kind := range s.clients {
		lo, hi := s.spread(kind)
		fmt.Fprintf(&b, " %s %.1f..%.1f (%.2fx);", clientNames[kind], lo, hi, hi/lo)
	}
	s.heapLine(&b)
	ranges := s.flatRanges(kindNetHTTP)
	if len(ranges) == 0 {
		b.WriteString(" net/http's curve is flat nowhere")
		return b.String()
	}
	fmt.Fprintf(&b, " where net/http's is flat (within %.0f%%):", (flatWithin-1)*100)
	for _, r := range ranges {
		n := s.ratio(kindNetHTTP, r[0], r[1])
		c := s.ratio(kindConnactor, r[0], r[1])
		fmt.Fprintf(&b, " %s %d..%d net/http %.2fx, connactor %.2fx;", s.name, r[0], r[1], n, c)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// heapLine writes each client's heap per route at each point of the sweep,
// in KB, when it was measured (the routes sweep).
func (s *sweep) heapLine(b *strings.Builder) {
	measured := false
	for _, pts := range s.points {
		for _, p := range pts {
			measured = measured || p.heap != 0
		}
	}
	if !measured {
		return
	}
	b.WriteString(" heap KB/route by " + s.name + ":")
	for _, kind := range s.clients {
		pts := slices.Clone(s.points[kind])
		slices.SortFunc(pts, func(a, b sweepPoint) int { return a.x - b.x })
		fmt.Fprintf(b, " %s", clientNames[kind])
		for i, p := range pts {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(b, "%s %d: %.1f", sep, p.x, p.heap/1024)
		}
		b.WriteString(";")
	}
}
