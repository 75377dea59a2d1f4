package main

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/connactor/connactor/internal/testkit/benchkit"
)

// perfTarget is one performance target: its name, the cells (server x
// scenario) it applies to, and the comparison that judges it in each of them,
// connactor's client against another client of the same cell.
type perfTarget struct {
	name      string         // as the summary prints it, in every cell alike
	servers   []string       // the servers whose cells it applies to
	scenarios *regexp.Regexp // the scenarios it applies to, by whole name
	client    string         // connactor's client in those cells
	base      string         // the client it is compared with
	cmp       comparison
}

var (
	everyServer = []string{serverGo, serverFasthttp, serverNginx}
	// The HTTP/1.1 targets are read on the fasthttp server: it costs least
	// and separates the clients most (client and server share the cores).
	h1Servers = []string{serverFasthttp}
	h1Cells   = regexp.MustCompile(`^(c16/13B|c64/13B|c256/13B|c64/16KiB)$`)
	// HTTP/2 runs on the servers that speak it over TLS.
	h2Servers = []string{serverGo, serverNginx}
	h2Cells   = regexp.MustCompile(`^h2/(c1|c64|c256)/13B$`)
)

// targets are the performance targets in force, the only place they are
// written: each cell of a run is judged against those that apply to it.
var targets = []perfTarget{
	{name: "vs pool+std", servers: h1Servers, scenarios: h1Cells, client: kindConnactor, base: kindStdPool,
		cmp: rateAtCPU{minRPS: 0.9, maxCPU: 1.15}},
	{name: "vs net/http", servers: h1Servers, scenarios: h1Cells, client: kindConnactor, base: kindNetHTTP,
		cmp: rateAtCPU{minRPS: 1.1, maxCPU: 0.9}},
	{name: "lock wait", servers: h1Servers, scenarios: h1Cells, client: kindConnactor, base: kindNetHTTP,
		cmp: below{col: colLockWait}},
	// Context switches are judged where the harness records them
	// (getrusage); elsewhere, and in runs saved before, not run.
	{name: "ctxsw", servers: h1Servers, scenarios: h1Cells, client: kindConnactor, base: kindNetHTTP,
		cmp: notAbove{col: colCtxSwitches, factor: 1.0}},
	{name: "h2", servers: h2Servers, scenarios: h2Cells, client: kindConnactorH2, base: kindNetHTTPH2,
		cmp: rateAtCPU{minRPS: 1.0, maxCPU: 1.0}},
	// The tail, in every cN cell.
	{name: "p99.9", servers: h1Servers, scenarios: regexp.MustCompile(`^c\d+/`), client: kindConnactor, base: kindNetHTTP,
		cmp: notAbove{col: colP999, factor: 1.2}},
	// churn and routes200 dial all along: the server closes connections,
	// or 200 routes share a limit of 64.
	{name: "dialing", servers: everyServer, scenarios: regexp.MustCompile(`^(churn|routes200)/13B$`),
		client: kindConnactor, base: kindNetHTTP, cmp: rateAtCPU{minRPS: 1.0, maxCPU: 1.0}},
}

func (t *perfTarget) appliesTo(server, scenario string) bool {
	return slices.Contains(t.servers, server) && t.scenarios.MatchString(scenario)
}

// rule says what the target asks, in words.
func (t *perfTarget) rule() string { return t.cmp.rule(clientNames[t.base]) }

// judge judges the target in a cell from its results: not run when
// connactor's client, the other client or a figure the comparison reads is
// missing from the cell.
func (t *perfTarget) judge(rs []*Result) verdict {
	v := verdict{target: t.name, rule: t.rule()}
	c, base := find(rs, t.client), find(rs, t.base)
	var missing []string
	if c == nil {
		missing = append(missing, "no "+clientNames[t.client])
	}
	if base == nil {
		missing = append(missing, "no "+clientNames[t.base])
	}
	if len(missing) == 0 {
		for _, col := range t.cmp.columns() {
			for _, r := range []*Result{c, base} {
				if _, ok := col.of(r); !ok {
					missing = append(missing, "no "+col.name+" of "+clientNames[r.Client])
				}
			}
		}
	}
	if len(missing) > 0 {
		v.got = strings.Join(missing, ", ")
		return v
	}
	got, ok := t.cmp.judge(c, base)
	v.got, v.outcome = got, notMet
	if ok {
		v.outcome = met
	}
	return v
}

// column is a figure of a result, as the table heads it.
type column struct {
	name   string
	of     func(*Result) (float64, bool) // false: not recorded (a run saved before it was, another OS)
	format func(float64) string
}

var (
	colRPS = column{"req/s", func(r *Result) (float64, bool) { return r.RPS, r.RPS > 0 },
		func(v float64) string { return fmt.Sprintf("%.0f", v) }}
	colCPU = column{"CPU us/req", func(r *Result) (float64, bool) { return r.CPUusPerReq, r.CPUusPerReq > 0 },
		func(v float64) string { return fmt.Sprintf("%.1f us", v) }}
	colCtxSwitches = column{"ctxsw/req", recorded(func(r *Result) *float64 { return r.CtxSwitchesPerReq }),
		func(v float64) string { return fmt.Sprintf("%.2f", v) }}
	colLockWait = column{"lock us/req", recorded(func(r *Result) *float64 { return r.LockWaitUsPerReq }),
		func(v float64) string { return fmt.Sprintf("%.2f us", v) }}
	colP999 = column{"p99.9", func(r *Result) (float64, bool) { return r.P999us, r.P999us > 0 },
		func(v float64) string { return micros(v) + " us" }}
)

func recorded(f func(*Result) *float64) func(*Result) (float64, bool) {
	return func(r *Result) (float64, bool) {
		if p := f(r); p != nil {
			return *p, true
		}
		return 0, false
	}
}

// comparison judges connactor's client against another client of a cell.
type comparison interface {
	columns() []column // the figures it reads, of both clients
	// judge returns connactor's figures against the other's as the summary
	// prints them, and whether the target is met.
	judge(c, base *Result) (got string, ok bool)
	rule(base string) string
}

// rateAtCPU: at least minRPS x the other client's req/s at most maxCPU x
// its CPU per request ("0.93x @ 1.10x").
type rateAtCPU struct{ minRPS, maxCPU float64 }

func (rateAtCPU) columns() []column { return []column{colRPS, colCPU} }

func (k rateAtCPU) judge(c, base *Result) (string, bool) {
	rps, cpu := c.RPS/base.RPS, c.CPUusPerReq/base.CPUusPerReq
	return fmt.Sprintf("%.2fx @ %.2fx", rps, cpu), rps >= k.minRPS && cpu <= k.maxCPU
}

func (k rateAtCPU) rule(base string) string {
	return fmt.Sprintf(">= %s %s's req/s at <= %s its CPU", times(k.minRPS), base, times(k.maxCPU))
}

// notAbove: a figure at most factor x the other client's.
type notAbove struct {
	col    column
	factor float64
}

func (k notAbove) columns() []column { return []column{k.col} }

func (k notAbove) judge(c, base *Result) (string, bool) {
	a, _ := k.col.of(c)
	b, _ := k.col.of(base)
	got := k.col.format(a) + " vs " + k.col.format(b)
	if k.factor != 1 && b > 0 {
		got += fmt.Sprintf(" = %.2fx", a/b)
	}
	return got, a <= k.factor*b
}

func (k notAbove) rule(base string) string {
	if k.factor == 1 {
		return fmt.Sprintf("%s <= %s's", k.col.name, base)
	}
	return fmt.Sprintf("%s <= %s %s's", k.col.name, times(k.factor), base)
}

// below: a figure below the other client's, or none at all (when neither
// waits, there is nothing to be below).
type below struct{ col column }

func (k below) columns() []column { return []column{k.col} }

func (k below) judge(c, base *Result) (string, bool) {
	a, _ := k.col.of(c)
	b, _ := k.col.of(base)
	return k.col.format(a) + " vs " + k.col.format(b), a < b || a == 0
}

func (k below) rule(base string) string {
	return fmt.Sprintf("%s below %s's (or none)", k.col.name, base)
}

// times writes a factor as the targets are written: 0.9x, 1.0x, 1.15x.
func times(f float64) string {
	s := fmt.Sprintf("%.2f", f)
	if strings.HasSuffix(s, "0") {
		s = s[:len(s)-1]
	}
	return s + "x"
}

// outcome is a target's judgement in a cell.
type outcome int

const (
	notRun outcome = iota // a client or a figure it needs is missing from the cell
	notMet
	met
)

func (o outcome) String() string {
	if o == notRun {
		return "not run"
	}
	return benchkit.Verdict(o == met)
}

// verdict is one target judged in one cell.
type verdict struct {
	target string // the target's name
	rule   string // what it asks
	got    string // connactor's figures as the line prints them; not run: what is missing
	outcome
}

func (v verdict) String() string {
	if v.outcome == notRun {
		return v.target + " not run (" + v.got + ")"
	}
	return v.target + " " + v.got + " " + v.outcome.String()
}

// cellTargets judges every target that applies to a cell, in the table's
// order, from the cell's results.
func cellTargets(server, scenario string, rs []*Result) []verdict {
	var vs []verdict
	for i := range targets {
		if t := &targets[i]; t.appliesTo(server, scenario) {
			vs = append(vs, t.judge(rs))
		}
	}
	return vs
}

// writeSummary prints one line per cell (server x scenario) with connactor's
// figures against the other clients' and the targets of that cell, each met,
// not met or not run, with its figures; then, per target, in how many cells
// it was met; then one line per sweep with how much each client's CPU per
// request varies along it.
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
// and for a cell where connactor or the client it is compared with did not
// run and no target applies.
func summaryLine(server, scenario string, rs []*Result) (string, []verdict) {
	if strings.HasPrefix(scenario, "sweep/") {
		return "", nil
	}
	vs := cellTargets(server, scenario, rs)
	figures := cellFigures(scenario, rs)
	if figures == "" {
		if len(vs) == 0 {
			return "", nil
		}
		figures = " connactor against net/http: not run"
		if strings.HasPrefix(scenario, "h2/") {
			figures = " connactor against net/http h2: not run"
		}
	}
	line := fmt.Sprintf("  %-8s %-18s%s", server, scenario, figures)
	if len(vs) == 0 {
		return line, vs
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return line + " | targets: " + strings.Join(parts, "; "), vs
}

// cellFigures is connactor's figures in a cell against the other clients';
// "" when connactor or net/http did not run in it.
func cellFigures(scenario string, rs []*Result) string {
	var b strings.Builder
	if strings.HasPrefix(scenario, "h2/") {
		base := find(rs, kindNetHTTPH2)
		if base == nil {
			return ""
		}
		for _, kind := range []string{kindConnactorH2, kindConnactorH1TLS} {
			if c := find(rs, kind); c != nil {
				fmt.Fprintf(&b, " %s: %.2fx req/s, %.2fx CPU, %.2fx allocs, %s ctxsw/req;", clientNames[kind],
					c.RPS/base.RPS, c.CPUusPerReq/base.CPUusPerReq, c.AllocsPerReq/base.AllocsPerReq,
					figure(c.CtxSwitchesPerReq))
			}
		}
		return strings.TrimSuffix(b.String(), ";") + " (of net/http h2)"
	}
	c, base := find(rs, kindConnactor), find(rs, kindNetHTTP)
	if c == nil || base == nil {
		return ""
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
	return b.String()
}

// tally counts, per target, the cells of the run it applies to, those where
// it was not met and those where it could not be judged, in the order the
// targets first appear.
type tally struct {
	order []string
	cells map[string]*targetCells
}

type targetCells struct {
	rule   string
	judged int      // cells it applies to
	missed []string // "server scenario figures" of each cell where it was not met
	notRun []string // "server scenario (what is missing)" of each cell where it could not be judged
}

func (t *tally) add(server, scenario string, vs []verdict) {
	for _, v := range vs {
		if t.cells == nil {
			t.cells = map[string]*targetCells{}
		}
		tc := t.cells[v.target]
		if tc == nil {
			tc = &targetCells{rule: v.rule}
			t.cells[v.target] = tc
			t.order = append(t.order, v.target)
		}
		tc.judged++
		switch v.outcome {
		case notMet:
			tc.missed = append(tc.missed, server+" "+scenario+" "+v.got)
		case notRun:
			tc.notRun = append(tc.notRun, server+" "+scenario+" ("+v.got+")")
		}
	}
}

// write prints one line per target: met when it was met in every cell of the
// run it applies to; not met when it was not in one of them; otherwise not
// run, when a cell could not judge it.
func (t *tally) write(w io.Writer) {
	if len(t.order) == 0 {
		return
	}
	fmt.Fprintln(w, "Targets over the run (met only if met in every cell of the run it applies to):")
	for _, name := range t.order {
		tc := t.cells[name]
		o := met
		switch {
		case len(tc.missed) > 0:
			o = notMet
		case len(tc.notRun) > 0:
			o = notRun
		}
		fmt.Fprintf(w, "  %-12s %-50s %s: met in %d of %d cells", name, tc.rule, o,
			tc.judged-len(tc.missed)-len(tc.notRun), tc.judged)
		if len(tc.missed) > 0 {
			fmt.Fprintf(w, "; not in %s", strings.Join(tc.missed, ", "))
		}
		if len(tc.notRun) > 0 {
			fmt.Fprintf(w, "; not run in %s", strings.Join(tc.notRun, ", "))
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
