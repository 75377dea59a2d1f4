package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// report is a run's results and the conditions they were measured in.
type report struct {
	Machine  machine  `json:"machine"`
	Duration string   `json:"duration_per_cell"`
	Count    int      `json:"count"`
	MaxOther float64  `json:"max_other_load,omitempty"`
	Warmup   string   `json:"warmup_per_cell"`
	Servers  []string `json:"servers"`
	Results  []Result `json:"results"`
}

type machine struct {
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	LoadBefore string `json:"loadavg_before,omitempty"` // /proc/loadavg: 1, 5, 15 minutes
	LoadAfter  string `json:"loadavg_after,omitempty"`
}

func newReport(opt *options) *report {
	return &report{
		Machine: machine{GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
			CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), LoadBefore: loadAvg()},
		Duration: opt.duration.String(), Warmup: opt.warmup.String(), Count: max(opt.count, 1), MaxOther: opt.maxOther, Servers: opt.servers,
	}
}

func (r *report) finish() { r.Machine.LoadAfter = loadAvg() }

// failed reports whether a cell had errors or completed no request.
func (r *report) failed() bool {
	for i := range r.Results {
		if r.Results[i].failed() {
			return true
		}
	}
	return false
}

func (r *report) retries() int {
	n := 0
	for i := range r.Results {
		n += r.Results[i].Retries
	}
	return n
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

var clientNames = map[string]string{
	kindNetHTTP: "net/http", kindConnactor: "connactor", kindFasthttp: "fasthttp", kindStdPool: "pool+std", kindRaw: "raw",
	kindConnactorAdaptive: "connactor+adaptive",
	kindNetHTTPH2:         "net/http h2", kindConnactorH2: "connactor h2", kindConnactorH1TLS: "connactor h1/TLS",
}

// writeTable prints the results as an aligned table, a blank line between
// scenarios, and the notes that say what the columns measure.
func (r *report) writeTable(w io.Writer) error {
	m := r.Machine
	fmt.Fprintf(w, "connbench: %s %s/%s, %d CPUs (GOMAXPROCS %d); %s measured per cell after %s warm-up",
		m.GoVersion, m.OS, m.Arch, m.CPUs, m.GOMAXPROCS, r.Duration, r.Warmup)
	if r.Count > 1 {
		fmt.Fprintf(w, "; median of %d interleaved rounds (+-: half the spread of req/s)", r.Count)
	}
	fmt.Fprintln(w)
	if r.MaxOther > 0 {
		fmt.Fprintf(w, "cells run again (up to %d times) while other processes used more than %.2f cores: %d re-runs\n",
			maxRetries, r.MaxOther, r.retries())
	}
	if m.LoadBefore != "" {
		fmt.Fprintf(w, "load average (1/5/15 min) before: %s, after: %s\n", m.LoadBefore, m.LoadAfter)
	}
	fmt.Fprintln(w)
	head := []string{"server", "scenario", "client", "req/s", "+-", "x net/http", "p50 us", "p99 us", "p99.9 us",
		"CPU us/req", "x net/http", "heap KB/route", "ctxsw/req", "lock us/req", "allocs/req", "x net/http", "dials", "errors",
		"server us/req", "other load"}
	right := []bool{false, false, false, true, true, true, true, true, true, true, true, true, true, true, true, true, true,
		true, true, true}
	rows := [][]string{head}
	for i, res := range r.Results {
		if i > 0 && (res.Scenario != r.Results[i-1].Scenario || res.Server != r.Results[i-1].Server) {
			rows = append(rows, nil)
		}
		rows = append(rows, []string{res.Server, res.Scenario, clientNames[res.Client],
			fmt.Sprintf("%.0f", res.RPS), spread(res), ratio(res.RPSvsNetHTTP),
			micros(res.P50us), micros(res.P99us), micros(res.P999us),
			fmt.Sprintf("%.1f", res.CPUusPerReq), ratio(res.CPUvsNetHTTP), heapPerRoute(res),
			figure(res.CtxSwitchesPerReq), figure(res.LockWaitUsPerReq),
			fmt.Sprintf("%.1f", res.AllocsPerReq), ratio(res.AllocsVsNetHTTP),
			fmt.Sprint(res.Dials), fmt.Sprint(res.Errors), serverCPU(res), otherLoad(res)})
	}
	if err := writeAligned(w, rows, right); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for i := range r.Results {
		if res := &r.Results[i]; res.FirstError != "" {
			fmt.Fprintf(w, "error: %s %s %s: %d errors, first: %s\n", res.Server, res.Scenario,
				clientNames[res.Client], res.Errors, res.FirstError)
		}
	}
	r.writeSummary(w)
	_, err := io.WriteString(w, tableNotes)
	return err
}

const tableNotes = `Notes:
- Every client has the same connection limit per route (scenario "cN": min(N, 16) connections; contended:
  8). The server runs in its own process; "x net/http" compares with net/http's Transport in the same run.
- CPU us/req: getrusage(RUSAGE_SELF) user+system time of this process over the measured window divided by
  the requests completed in it: the client, its GC and this harness (two monotonic clock reads and a
  histogram increment per request); the server is not included. allocs/req: runtime.MemStats.Mallocs
  delta likewise. dials: connections opened during the cell, warm-up included. server us/req: the server
  process's CPU per request (/proc, 10 ms ticks). other load: CPU used by the rest of the machine during
  the window, in cores (of 2 here): anything well above 0 means the cell was disturbed.
- ctxsw/req: getrusage's voluntary plus involuntary context switches of this process over the window, per
  request: threads that blocked and woke (a goroutine hand-off that wakes a sleeping thread costs one or
  two). lock us/req: the runtime's /sync/mutex/wait/total:seconds over the window, per request: time
  goroutines spent blocked on sync.Mutex, sync.RWMutex and the runtime's own locks (channels' included).
  Before each cell the goroutines of the cells before it are given time to end, so that only the client
  under test runs in the window.
- Requests are built once per caller and re-used, for every client: request building is not measured.
  net/http and connactor are called through RoundTrip; bodies are read to EOF and closed.
- fasthttp: HostClient (MaxConns), callers wait for a connection (MaxConnWaitTimeout); fasthttp.Client
  (MaxConnsPerHost) for several routes. raw: a fixed set of connections dialed up front, a pre-serialised
  GET and minimal status/Content-Length parsing: the practical limit. pool+std: raw's connections and
  channel, exchanging with net/http's Request.Write and http.ReadResponse (as connactor does): a nearly
  free pool on net/http's parsing; connactor minus pool+std is what connactor's pool costs.
- routes200: 200 routes (127.0.0.1..200, one port), each request to a uniformly random route, 4 connections
  per route. Only connactor has a limit on open connections across routes (MaxConnsTotal 64: it evicts
  the least recently used idle connection). net/http has none: MaxIdleConns 64 caps its idle connections
  (closing the least recently used) while up to 800 may be open; fasthttp, pool+std and raw have no
  total limit (pool+std and raw hold all 800 open).
- routes200open128: routes200 with connactor's MaxConnsTotal at 128, the bound net/http's Transport has there
  (64 idle, plus one connection in use per caller): both then dial about as often.
- churn: the server closes each connection after its 10th response (Connection: close; nginx:
  keepalive_requests 10 on /13c): every client dials about one connection per 10 requests.
- h2/cN: over TLS against the server's TLS listener (Go's http.Server, nginx's "listen ... ssl http2"):
  net/http's Transport and connactor speaking HTTP/2 (one connection carries the streams), and connactor
  speaking HTTP/1.1 over TLS (min(N, 16) connections); ratios are to net/http h2.
- sweep/routesR: 64 callers, each request to a random route of R (named rK.connbench.test, all dialed to
  the server's one address), up to 64 connections per route, one request to every route before the
  warm-up: CPU per request and heap per route against the number of routes. The total limit (connactor's
  MaxConnsTotal, net/http's MaxIdleConns) is 12,000, what the descriptors of a process allow here: it
  does not bind up to 10,000 routes; at 100,000 most requests find their route without a connection and
  dial, the least recently used idle one closed. heap KB/route: the client's live heap at the end of the
  window (after a full collection) over the routes: routes, connections and all. sweep/callersN: N
  callers on one route with min(N, 16) connections. With -svg, each sweep is drawn as a chart.
`

// heapPerRoute prints a cell's heap per route in KB ("-" where it was not
// measured: outside the routes sweep).
func heapPerRoute(r Result) string {
	if r.HeapPerRoute == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", r.HeapPerRoute/1024)
}

// figure prints a per-request figure that may be missing (nil: "-"), with
// two decimals: context switches and lock waits are fractions of a request.
func figure(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}

func ratio(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}

func spread(r Result) string {
	if r.Runs < 2 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", r.Spread*100)
}

func serverCPU(r Result) string {
	if r.OtherCores < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", r.ServerCPUusPerReq)
}

func otherLoad(r Result) string {
	if r.OtherCores < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.OtherCores)
}

func micros(us float64) string {
	if us < 100 {
		return fmt.Sprintf("%.1f", us)
	}
	return fmt.Sprintf("%.0f", us)
}

// writeAligned prints rows in columns (nil rows are blank lines), text columns
// left-aligned and numeric ones right-aligned.
func writeAligned(w io.Writer, rows [][]string, right []bool) error {
	width := make([]int, len(right))
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], len(c))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for i, c := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-len(c))
			if right[i] {
				b.WriteString(pad + c)
			} else if i < len(row)-1 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(c)
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// progress shows what runs: on a terminal one line rewritten in place (\r)
// with the live request rate; otherwise one line per finished cell.
type progress struct {
	w     io.Writer
	live  bool
	total int
	i     int
	label string
	shown int // length of the last live line, to blank it out
}

// start names the next cell; attempt > 0 is a re-run of the same cell.
func (p *progress) start(srv, sc, client string, attempt int) {
	if attempt == 0 {
		p.i++
	}
	p.label = fmt.Sprintf("[%d/%d] %s server, %s, %s", p.i, p.total, srv, sc, clientNames[client])
	if attempt > 0 {
		p.label += fmt.Sprintf(" (again, %d)", attempt)
	}
}

// wait sleeps d, updating the live line every 250ms; count (may be nil) gives
// the requests completed so far in this phase.
func (p *progress) wait(d time.Duration, phase string, count func() int64) {
	if p.w == nil || !p.live {
		time.Sleep(d)
		return
	}
	start := time.Now()
	deadline := start.Add(d)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		el := time.Since(start)
		line := fmt.Sprintf("%s: %s %.1f/%.1fs", p.label, phase, el.Seconds(), d.Seconds())
		if count != nil && el >= 100*time.Millisecond {
			line += fmt.Sprintf(", %.0f req/s", float64(count())/el.Seconds())
		}
		p.show(line)
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		select {
		case <-t.C:
		case <-time.After(left):
		}
	}
}

func (p *progress) show(line string) {
	pad := ""
	if n := p.shown - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(p.w, "\r%s%s", line, pad)
	p.shown = len(line)
}

func (p *progress) done(r *Result) {
	if p.w == nil {
		return
	}
	msg := fmt.Sprintf("%s: %.0f req/s, %.1f CPU us/req, %s ctxsw/req, %.1f allocs/req", p.label, r.RPS, r.CPUusPerReq,
		figure(r.CtxSwitchesPerReq), r.AllocsPerReq)
	if r.Errors > 0 {
		msg += fmt.Sprintf(", %d ERRORS (%s)", r.Errors, r.FirstError)
	}
	if p.live {
		p.show(msg)
		if r.Errors > 0 {
			fmt.Fprintln(p.w)
			p.shown = 0
		}
		return
	}
	fmt.Fprintln(p.w, msg)
}

// note prints a line of its own under the live line.
func (p *progress) note(msg string) {
	if p.w == nil {
		return
	}
	if p.live {
		fmt.Fprintln(p.w)
		p.shown = 0
	}
	fmt.Fprintln(p.w, msg)
}

func (p *progress) finish() {
	if p.w != nil && p.live && p.shown > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.shown))
		p.shown = 0
	}
}
