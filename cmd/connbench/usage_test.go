package main

import (
	"testing"
	"time"
)

// The window's context switches and lock waits are counted per request, as
// its CPU is; a runtime that does not report lock waits leaves them unknown.
func TestPerRequestFiguresCountTheWindowsDeltas(t *testing.T) {
	before := usage{cpu: time.Second, switches: 1000, lockWait: 0.5, mallocs: 10, bytes: 100}
	after := usage{cpu: time.Second + 20*time.Millisecond, switches: 1500, lockWait: 0.502, mallocs: 1010, bytes: 2100}
	res := Result{Requests: 1000}
	res.perRequest(before, after)
	if res.CPUusPerReq != 20 || res.AllocsPerReq != 1 || res.BytesPerReq != 2 {
		t.Errorf("CPU %v us/req, %v allocs/req, %v B/req", res.CPUusPerReq, res.AllocsPerReq, res.BytesPerReq)
	}
	if res.CtxSwitchesPerReq == nil || *res.CtxSwitchesPerReq != 0.5 {
		t.Errorf("context switches per request: %v, want 0.5", res.CtxSwitchesPerReq)
	}
	if res.LockWaitUsPerReq == nil || *res.LockWaitUsPerReq < 1.999 || *res.LockWaitUsPerReq > 2.001 {
		t.Errorf("lock wait per request: %v, want 2 us", res.LockWaitUsPerReq)
	}

	before.lockWait, after.lockWait = -1, -1
	res = Result{Requests: 1000}
	res.perRequest(before, after)
	if res.LockWaitUsPerReq != nil {
		t.Errorf("lock wait %v, want unknown when the runtime does not report it", *res.LockWaitUsPerReq)
	}
}

// This process's readings move forward: the runtime reports its lock waits
// and getrusage its context switches.
func TestReadUsageReportsLockWaitsAndContextSwitches(t *testing.T) {
	u := readUsage()
	if u.lockWait < 0 {
		t.Fatalf("the runtime does not report %s", lockWaitMetric)
	}
	done := make(chan struct{})
	go func() { // ends at once: a goroutine hand-off, not a timing
		close(done)
	}()
	<-done
	time.Sleep(time.Millisecond) // blocks this thread at least once
	v := readUsage()
	if v.switches < u.switches || v.lockWait < u.lockWait || v.cpu < u.cpu {
		t.Errorf("readings went back: %+v then %+v", u, v)
	}
}

// settle returns as soon as the goroutines of earlier cells have ended, and
// reports those left once their number stops changing, or at the timeout.
func TestSettleWaitsForEarlierCellsGoroutines(t *testing.T) {
	// script returns the given counts, one a call, then the last one again.
	script := func(counts ...int) func() int {
		return func() int {
			n := counts[0]
			if len(counts) > 1 {
				counts = counts[1:]
			}
			return n
		}
	}
	const base = 10
	if n := settle(script(13, 12, 11, 10), base, time.Minute, time.Minute); n != 0 {
		t.Errorf("goroutines that ended: %d left, want 0", n)
	}
	if n := settle(script(12, 11, 11), base, 20*time.Millisecond, time.Minute); n != 1 {
		t.Errorf("one goroutine asleep: %d left, want 1", n)
	}
	flip := 0
	changing := func() int { flip++; return base + 1 + flip%2 }
	if n := settle(changing, base, time.Minute, 20*time.Millisecond); n < 1 {
		t.Errorf("goroutines still coming and going at the timeout: %d left, want them counted", n)
	}
}

// The hand-off figures are related to net/http's in the same cell, as CPU
// is; a figure net/http lacks (a saved run) or has at zero gives no ratio.
func TestHandOffRatiosAreToNetHTTPsInTheSameCell(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	rs := []Result{
		{Client: kindNetHTTP, Requests: 1, RPS: 1, CPUusPerReq: 1, CtxSwitchesPerReq: f(0.5), LockWaitUsPerReq: f(0)},
		{Client: kindConnactor, Requests: 1, RPS: 1, CPUusPerReq: 1, CtxSwitchesPerReq: f(0.25), LockWaitUsPerReq: f(0.1)},
		{Client: kindStdPool, Requests: 1, RPS: 1, CPUusPerReq: 1},
	}
	ratios(rs)
	if r := rs[1].CtxSwitchesVsNetHTTP; r == nil || *r != 0.5 {
		t.Errorf("connactor's context switches x net/http: %v, want 0.5", r)
	}
	if rs[1].LockWaitVsNetHTTP != nil {
		t.Errorf("lock wait ratio %v to net/http's zero", *rs[1].LockWaitVsNetHTTP)
	}
	if rs[2].CtxSwitchesVsNetHTTP != nil {
		t.Errorf("a ratio for a figure that was not measured: %v", *rs[2].CtxSwitchesVsNetHTTP)
	}
}
