package main

import (
	"runtime"
	"runtime/metrics"
	"syscall"
	"time"
)

// usage is the process's resource use at one instant.
type usage struct {
	cpu      time.Duration
	switches int64   // context switches, voluntary and involuntary (getrusage)
	lockWait float64 // seconds blocked on locks (lockWaitMetric); < 0: not reported
	mallocs  uint64
	bytes    uint64
	gcs      uint32
}

// lockWaitMetric is the runtime's cumulative time goroutines spent blocked
// on sync.Mutex, sync.RWMutex and the runtime's own locks.
const lockWaitMetric = "/sync/mutex/wait/total:seconds"

func readUsage() usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic("connbench: getrusage: " + err.Error())
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	sample := []metrics.Sample{{Name: lockWaitMetric}}
	metrics.Read(sample)
	lockWait := -1.0
	if sample[0].Value.Kind() == metrics.KindFloat64 {
		lockWait = sample[0].Value.Float64()
	}
	return usage{
		cpu:      time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		switches: int64(ru.Nvcsw) + int64(ru.Nivcsw),
		lockWait: lockWait,
		mallocs:  ms.Mallocs, bytes: ms.TotalAlloc, gcs: ms.NumGC,
	}
}

// perRequest sets the figures of the window between before and after that
// are counted per request: CPU, allocations, context switches, lock waits.
func (res *Result) perRequest(before, after usage) {
	n := float64(res.Requests)
	res.CPUusPerReq = float64(after.cpu-before.cpu) / 1e3 / n
	res.AllocsPerReq = float64(after.mallocs-before.mallocs) / n
	res.BytesPerReq = float64(after.bytes-before.bytes) / n
	sw := float64(after.switches-before.switches) / n
	res.CtxSwitchesPerReq = &sw
	if before.lockWait >= 0 && after.lockWait >= 0 {
		lw := (after.lockWait - before.lockWait) * 1e6 / n
		res.LockWaitUsPerReq = &lw
	}
}

// settleTimeout bounds the wait, before a cell, for the goroutines of the
// cells before it to end (see settle); settleQuiet is how long their number
// must stay the same for the rest to count as asleep.
const (
	settleTimeout = 500 * time.Millisecond
	settleQuiet   = 50 * time.Millisecond
)

// settle waits until count (runtime.NumGoroutine) is no more than base, so
// that the goroutines of earlier cells' clients (net/http's connection loops
// end a moment after CloseIdleConnections) do not use CPU and context
// switches inside this cell's window. It gives up once their number has not
// changed for quiet (fasthttp's idle-connection cleaners sleep up to 10 s
// before they end, and wake once, at most, during a later cell), or after
// timeout. It returns how many are left above base.
func settle(count func() int, base int, quiet, timeout time.Duration) int {
	start := time.Now()
	last, since := -1, start
	for {
		n := count() - base
		if n <= 0 {
			return 0
		}
		now := time.Now()
		if n != last {
			last, since = n, now
		}
		if now.Sub(since) >= quiet || now.Sub(start) >= timeout {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}
