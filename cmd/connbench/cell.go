package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Result is one cell: one client on one scenario against one server.
type Result struct {
	Server        string `json:"server"`
	Scenario      string `json:"scenario"`
	Client        string `json:"client"`
	Callers       int    `json:"callers"`
	ConnsPerRoute int    `json:"conns_per_route"`
	TotalLimit    int    `json:"total_limit"` // connactor's MaxConnsTotal; net/http's MaxIdleConns with several routes
	Routes        int    `json:"routes"`
	BodyBytes     int    `json:"body_bytes"`

	Runs    int       `json:"runs"`               // rounds run; the figures are the median one's (by RPS)
	RPSRuns []float64 `json:"rps_runs,omitempty"` // every round's RPS
	Spread  float64   `json:"rps_spread"`         // (max - min) / 2 / median of RPSRuns
	Retries int       `json:"retries"`            // runs discarded for other load above -maxother

	Requests   int64   `json:"requests"` // completed in the measured window
	Errors     int64   `json:"errors"`   // failed requests, warm-up included
	FirstError string  `json:"first_error,omitempty"`
	Seconds    float64 `json:"seconds"`
	RPS        float64 `json:"rps"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	P999us     float64 `json:"p999_us"`
	MeanUs     float64 `json:"mean_us"`
	// CPUusPerReq is getrusage(RUSAGE_SELF) user+system time over the window
	// divided by Requests: the client's work plus GC and this harness (the
	// server is another process).
	CPUusPerReq float64 `json:"cpu_us_per_req"`
	// CtxSwitchesPerReq is getrusage(RUSAGE_SELF)'s voluntary plus
	// involuntary context switches over the window divided by Requests: how
	// often the process's threads blocked and woke (a goroutine hand-off that
	// has to wake a sleeping thread costs one or two). nil in runs saved
	// before it was measured.
	CtxSwitchesPerReq *float64 `json:"ctx_switches_per_req,omitempty"`
	// LockWaitUsPerReq is the runtime's /sync/mutex/wait/total:seconds over
	// the window divided by Requests, in us: the time goroutines spent blocked
	// on sync.Mutex, sync.RWMutex and runtime-internal locks (channels
	// included). nil when the runtime does not report it, and in runs saved
	// before it was measured.
	LockWaitUsPerReq *float64 `json:"lock_wait_us_per_req,omitempty"`
	AllocsPerReq     float64  `json:"allocs_per_req"` // runtime.MemStats.Mallocs delta / Requests
	BytesPerReq      float64  `json:"alloc_bytes_per_req"`
	GCs              uint32   `json:"gcs"`
	// HeapPerRoute is the live heap the client holds per route at the end of
	// the measured window, in bytes: the process's live heap then, less its
	// live heap before the client was made, over Routes (each after a full
	// collection, outside the window). Measured in the routes sweep only
	// (0 elsewhere, and in runs saved before it was measured).
	HeapPerRoute float64 `json:"heap_bytes_per_route,omitempty"`
	// ServerCPUusPerReq is the server process's CPU per request (from
	// /proc/pid/stat, 10 ms ticks). OtherCores is the CPU the rest of the
	// machine used during the window, in cores (from /proc/stat, minus this
	// process and the server): load that disturbed the measurement. -1 when
	// unknown.
	ServerCPUusPerReq float64 `json:"server_cpu_us_per_req"`
	OtherCores        float64 `json:"other_load_cores"`
	Dials             int64   `json:"dials"` // connections opened, warm-up included
	DialsPerKReq      float64 `json:"dials_per_1k_req"`
	// Lingering is how many goroutines of earlier cells (their clients'
	// connection loops and timers) were still there when this cell's client
	// was made, after waiting for them to end (see settle): 0 when only the
	// client under test ran in the process.
	Lingering int `json:"lingering_goroutines,omitempty"`
	// Ratios to net/http's result on the same server and scenario (nil when
	// net/http did not run or a value is 0).
	RPSvsNetHTTP         *float64 `json:"rps_vs_nethttp,omitempty"`
	CPUvsNetHTTP         *float64 `json:"cpu_vs_nethttp,omitempty"`
	AllocsVsNetHTTP      *float64 `json:"allocs_vs_nethttp,omitempty"`
	CtxSwitchesVsNetHTTP *float64 `json:"ctx_switches_vs_nethttp,omitempty"`
	LockWaitVsNetHTTP    *float64 `json:"lock_wait_vs_nethttp,omitempty"`
}

func (r *Result) failed() bool { return r.Errors > 0 || r.Requests == 0 }

// callerState is one caller goroutine's: its own counters and histogram, so
// that recording a request touches no shared cache line.
type callerState struct {
	w        worker
	rng      *rand.Rand
	n        atomic.Int64 // requests completed while measuring (read live by the progress line)
	errs     int64
	firstErr error
	hist     histogram
}

// phases of a cell, read by every caller after each request.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
)

// epoch is the origin of latency timestamps: time.Since reads only the
// monotonic clock.
var epoch = time.Now()

func (cs *callerState) run(phase *atomic.Int32, routes int) {
	for {
		if phase.Load() == phaseStop {
			return
		}
		route := 0
		if routes > 1 {
			route = cs.rng.IntN(routes)
		}
		t0 := time.Since(epoch)
		err := cs.w.do(route)
		d := time.Since(epoch) - t0
		if err != nil {
			cs.errs++
			if cs.firstErr == nil {
				cs.firstErr = err
			}
			time.Sleep(time.Millisecond) // no busy loop against a broken server
			continue
		}
		if phase.Load() == phaseMeasure {
			cs.hist.record(int64(d))
			cs.n.Add(1)
		}
	}
}

// runCell runs one client on one scenario: warm-up, then the measured window;
// the callers run back to back throughout, and only requests completed inside
// the window are counted. base is the number of goroutines the process runs
// without any client (see settle).
func runCell(opt *options, srv string, srvPID int, sc scenario, targets []target, kind string, base int, p *progress) Result {
	res := Result{Server: srv, Scenario: sc.Name, Client: kind, Callers: sc.Callers, ConnsPerRoute: sc.Conns,
		Routes: sc.Routes, BodyBytes: sc.BodyLen}
	if sc.Routes > 1 {
		res.TotalLimit = sc.total()
	}
	res.Lingering = settle(runtime.NumGoroutine, base, settleQuiet, settleTimeout)
	var heap0 uint64
	if sc.Sweep == sweepByRoutes {
		heap0 = liveHeap()
	}
	var dials atomic.Int64
	bc, err := newBenchClient(kind, clientSpec{sc: sc, targets: targets, dials: &dials, tls: opt.tls})
	if err != nil {
		res.Errors, res.FirstError = 1, err.Error()
		return res
	}
	callers := make([]*callerState, sc.Callers)
	for i := range callers {
		callers[i] = &callerState{w: bc.newWorker(), rng: rand.New(rand.NewPCG(uint64(i), 0x636f6e6e))}
	}
	if sc.Prime {
		if err := prime(callers, sc.Routes); err != nil {
			bc.close()
			res.Errors, res.FirstError = 1, "priming: "+err.Error()
			return res
		}
	}
	runtime.GC() // start each cell with the previous one's garbage collected

	var phase atomic.Int32
	var wg sync.WaitGroup
	for _, cs := range callers {
		wg.Go(func() { cs.run(&phase, sc.Routes) })
	}
	live := func() int64 {
		var n int64
		for _, cs := range callers {
			n += cs.n.Load()
		}
		return n
	}
	p.wait(max(opt.warmup, sc.MinWarmup), "warm-up", nil)
	stopProfile := startProfile(opt.cpuprofile, srv, sc.Name, kind)
	before := readUsage()
	busy0, srv0 := machineBusy(), processCPU(srvPID)
	phase.Store(phaseMeasure)
	start := time.Now()
	p.wait(opt.duration, "measure", live)
	phase.Store(phaseStop)
	elapsed := time.Since(start)
	after := readUsage()
	busy1, srv1 := machineBusy(), processCPU(srvPID)
	stopProfile()
	wg.Wait()
	if sc.Sweep == sweepByRoutes {
		res.HeapPerRoute = (float64(liveHeap()) - float64(heap0)) / float64(sc.Routes)
	}
	bc.close()

	var h histogram
	for _, cs := range callers {
		res.Requests += cs.n.Load()
		res.Errors += cs.errs
		if cs.firstErr != nil && res.FirstError == "" {
			res.FirstError = cs.firstErr.Error()
		}
		h.merge(&cs.hist)
	}
	res.Seconds = elapsed.Seconds()
	res.Dials = dials.Load()
	res.GCs = after.gcs - before.gcs
	if busy0 >= 0 && busy1 >= 0 && srv0 >= 0 && srv1 >= 0 {
		// CPU nobody in this benchmark used: other work on the machine.
		other := (busy1 - busy0) - (after.cpu - before.cpu) - (srv1 - srv0)
		res.OtherCores = max(other.Seconds(), 0) / elapsed.Seconds()
		if res.Requests > 0 {
			res.ServerCPUusPerReq = float64(srv1-srv0) / 1e3 / float64(res.Requests)
		}
	} else {
		res.OtherCores = -1
	}
	if res.Requests > 0 {
		n := float64(res.Requests)
		res.RPS = n / res.Seconds
		res.perRequest(before, after)
		res.DialsPerKReq = float64(res.Dials) * 1000 / n
		res.P50us = float64(h.quantile(0.50)) / 1e3
		res.P99us = float64(h.quantile(0.99)) / 1e3
		res.P999us = float64(h.quantile(0.999)) / 1e3
		res.MeanUs = h.mean() / 1e3
	}
	return res
}

// liveHeap returns the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// prime sends one request to every route, the callers sharing the routes
// among them, so that each route has a connection before the warm-up.
func prime(callers []*callerState, routes int) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(callers))
	for i, cs := range callers {
		wg.Go(func() {
			for r := i; r < routes; r += len(callers) {
				if err := cs.w.do(r); err != nil {
					errs <- fmt.Errorf("route %d: %w", r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// startProfile starts a CPU profile of one cell in dir (none when dir is
// empty) and returns what stops it. The profiler's own cost is then part of
// the cell's CPU per request.
func startProfile(dir, srv, sc, kind string) (stop func()) {
	if dir == "" {
		return func() {}
	}
	name := strings.NewReplacer("/", "-").Replace(fmt.Sprintf("%s_%s_%s.pprof", srv, sc, kind))
	f, err := os.Create(filepath.Join(dir, name))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "connbench: -cpuprofile:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// run starts each server in turn and runs every scenario and client against
// it, opt.count rounds of the clients in turn per scenario (interleaved, so
// that a change in the machine's load hits every client alike).
func run(opt *options) (*report, error) {
	rep := newReport(opt)
	listeners, withTLS := 1, false
	for _, sc := range opt.scenarios {
		if !sc.Hosts {
			listeners = max(listeners, sc.Routes)
		}
		withTLS = withTLS || sc.TLS
	}
	var certs *benchCert
	if withTLS {
		var err error
		if certs, err = newBenchCert(); err != nil {
			return nil, fmt.Errorf("TLS certificate: %w", err)
		}
		defer certs.remove()
		opt.tls = certs.clientConfig()
	}
	count := max(opt.count, 1)
	cells := 0
	for _, kind := range opt.servers {
		for _, sc := range opt.scenarios {
			if runsOn(sc, kind) {
				cells += len(sc.clients(opt)) * count
			}
		}
	}
	p := &progress{w: opt.progress, live: opt.live, total: cells}
	for _, kind := range opt.servers {
		srv, err := startServer(kind, listeners, opt.nginx, certs)
		if err != nil {
			return nil, fmt.Errorf("server %s: %w", kind, err)
		}
		// The goroutines this process runs with no client: the cells wait
		// for their predecessors' to end (settle) before they start.
		base := runtime.NumGoroutine()
		for _, sc := range opt.scenarios {
			if !runsOn(sc, kind) {
				continue
			}
			targets := targetsFor(srv, sc)
			runs := map[string][]Result{}
			clients := sc.clients(opt)
			for round := 0; round < count; round++ {
				for _, c := range clients {
					var r Result
					for attempt := 0; ; attempt++ {
						p.start(kind, sc.Name, c, attempt)
						r = runCell(opt, kind, srv.cmd.Process.Pid, sc, targets, c, base, p)
						r.Retries = attempt
						p.done(&r)
						if opt.maxOther <= 0 || r.OtherCores <= opt.maxOther || attempt == maxRetries {
							break
						}
						p.note(fmt.Sprintf("  other load %.2f cores > -maxother %.2f: waiting for quiet, then again", r.OtherCores, opt.maxOther))
						waitQuiet(opt.maxOther, 2*time.Minute)
					}
					runs[c] = append(runs[c], r)
				}
			}
			first := len(rep.Results)
			for _, c := range clients {
				rep.Results = append(rep.Results, median(runs[c]))
			}
			ratios(rep.Results[first:])
		}
		srv.stop()
	}
	p.finish()
	rep.finish()
	return rep, nil
}

// maxRetries bounds the re-runs of a disturbed cell (-maxother).
const maxRetries = 5

// waitQuiet waits until the machine uses less than maxCores of CPU over one
// second (this process and the server are idle meanwhile), or timeout.
func waitQuiet(maxCores float64, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b0 := machineBusy()
		time.Sleep(time.Second)
		b1 := machineBusy()
		if b0 < 0 || b1 < 0 || (b1-b0).Seconds() < maxCores {
			return
		}
	}
}

// median returns the run with the median requests/s (all its figures come from
// that run), with the errors of every run and the spread of their rates.
func median(runs []Result) Result {
	sorted := append([]Result(nil), runs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].RPS < sorted[j].RPS })
	m := sorted[len(sorted)/2]
	m.Runs = len(runs)
	m.Errors, m.Retries = 0, 0
	for _, r := range runs {
		m.Errors += r.Errors
		m.Retries += r.Retries
		if m.FirstError == "" {
			m.FirstError = r.FirstError
		}
	}
	if len(runs) > 1 {
		for _, r := range runs {
			m.RPSRuns = append(m.RPSRuns, r.RPS)
		}
		if m.RPS > 0 {
			m.Spread = (sorted[len(sorted)-1].RPS - sorted[0].RPS) / 2 / m.RPS
		}
	}
	return m
}

// runsOn reports whether sc runs against server kind: the TLS cells need a
// server that speaks HTTP/2 over TLS (Go's and nginx's, not fasthttp's).
func runsOn(sc scenario, kind string) bool {
	return !sc.TLS || kind != serverFasthttp
}

// ratios relates each result of one server and scenario to net/http's (its
// HTTP/2 Transport in the HTTP/2 cells).
func ratios(rs []Result) {
	var base *Result
	for i := range rs {
		if (rs[i].Client == kindNetHTTP || rs[i].Client == kindNetHTTPH2) && rs[i].Requests > 0 {
			base = &rs[i]
		}
	}
	if base == nil {
		return
	}
	for i := range rs {
		r := &rs[i]
		if r.Requests == 0 {
			continue
		}
		r.RPSvsNetHTTP = quotient(r.RPS, base.RPS)
		r.CPUvsNetHTTP = quotient(r.CPUusPerReq, base.CPUusPerReq)
		r.AllocsVsNetHTTP = quotient(r.AllocsPerReq, base.AllocsPerReq)
		r.CtxSwitchesVsNetHTTP = quotientOf(r.CtxSwitchesPerReq, base.CtxSwitchesPerReq)
		r.LockWaitVsNetHTTP = quotientOf(r.LockWaitUsPerReq, base.LockWaitUsPerReq)
	}
}

func quotient(a, b float64) *float64 {
	if b <= 0 {
		return nil
	}
	q := a / b
	return &q
}

// quotientOf is quotient of two figures that may be missing (nil).
func quotientOf(a, b *float64) *float64 {
	if a == nil || b == nil {
		return nil
	}
	return quotient(*a, *b)
}
