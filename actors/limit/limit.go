// Package limit is a route's adaptive limit on its requests in flight: a pure
// state machine that the route actor holds and feeds inside its Receive. It
// starts no goroutine and reads no clock: every time comes in as an argument.
// It is not safe for concurrent use (its one owner is the route).
//
// # The algorithm
//
// The limit follows the gradient rule with a latency tolerance of Netflix's
// concurrency-limits GradientLimit (rttTolerance 2.0) and Envoy's adaptive
// concurrency filter (gradient = minRTT plus a buffer over the sampled
// latency), which apply TCP Vegas's idea (Brakmo and Peterson, "TCP Vegas: End
// to End Congestion Avoidance on a Global Internet", IEEE JSAC 1995) to
// requests: latency above the no-load latency means requests queue upstream.
//
// A sample is the latency of one request from its write to its response head,
// and the number of the route's requests in flight when it was written (itself
// included). With ratio = latency / no-load latency:
//
//   - ratio above Tolerance (default 2), with the latency also more than
//     Slack (default 10 ms) above the no-load latency: the limit is
//     multiplied by Tolerance/ratio, by 0.5 at the least;
//   - a request whose caller gave up (OnTimeout) after it had been in flight
//     that late (Tolerance times the no-load latency, and Slack above it)
//     halves the limit, whatever latencies the upstream showed before;
//   - otherwise, when the request was written with the limit full (in flight
//     at least the limit), the limit grows by 1/limit: one more per round of
//     requests, as TCP's congestion avoidance does. A request written while
//     the route had room says nothing about a higher limit, so the limit never
//     grows while the route is app-limited.
//
// The limit stays within [Min, Max]. An upstream that serves K requests at a
// time and queues the rest answers in about n/K service times with n of the
// route's requests in it, so the limit settles where n/K is near Tolerance:
// about 2K requests held at the upstream.
//
// Slack is what "well above" means for a fast upstream. A ratio alone reads a
// loopback or same-rack upstream answering in 50 µs, and in 2 ms once a few
// dozen requests share its cores and the client's, as a queue forty times
// its service time, and holds the route to a handful of requests while the
// upstream has room for many more (measured: a third of the throughput of a
// fixed limit in connbench's healthy cells). A queue of a few milliseconds
// is not what the limit is for: a caller gains nothing from a lower limit
// until the upstream's queue costs it more than Slack, so latency rises
// below it count as near the no-load latency. An upstream whose service
// time is above Slack is governed by the ratio alone, as before.
//
// A decrease applies once per round, as TCP's NewReno reduces once per window
// of data (RFC 6582): samples of requests written before the last decrease
// describe the old limit and change nothing, so a wave of timeouts halves the
// limit once, not once per request. Timeouts never teach a latency: a request
// that timed out (or failed at once) says nothing of how fast the upstream
// answers, and an estimate fed such samples drifts toward zero.
//
// # The no-load latency
//
// The no-load latency falls at once to any faster sample. It rises only by
// re-measurement: the limit keeps the minimum latency of the samples written
// in the current window (Window, default 2 s) by a request that was alone in
// flight on the route (in flight = 1), and when the window ends with such
// samples, their minimum becomes the no-load latency. So after the upstream
// slows down for good, the limit falls (every sample is far above the old
// no-load latency) until requests go alone, and their latency is the new
// no-load latency within one or two windows; the limit then grows back to
// about 2K at the new speed. It is passive: no request is held back to probe.
//
// Only lone requests re-measure it. A route whose upstream queues its requests
// sees latencies that grow with its own requests in flight; a minimum taken
// from those would rise with each window, and the limit with it, without end.
// A floor Min above 1 therefore never re-measures a higher latency while the
// route is busy (its requests are never alone): the limit stays at the floor
// while the upstream is slow, and the no-load latency it kept brings it back
// when the upstream recovers. Only requests written inside the window count
// toward its minimum, so a request that started before it, in other
// conditions, does not skew it.
//
// # Why not github.com/platinummonkey/go-concurrency-limits
//
// That Go port of Netflix's library has Gradient2, Vegas and AIMD, but each
// OnSample takes a sync.Mutex (and its measurements an RWMutex of their own)
// and calls metric listeners: measured side by side, it cost two to four
// times what OnResponse here costs (BenchmarkOnResponse: no lock, no
// allocation). Its Vegas resets its no-load minimum to whichever
// single sample comes next, taken under load; of the pitfalls above it
// guards only app-limited growth (and lets the limit double while half of it
// is used); and its module requires Datadog, Prometheus and gRPC clients.
// The rule here is short enough to own.
package limit

import (
	"fmt"
	"time"
)

// Config sets a Limit's bounds and tuning. Zero values mean the defaults.
type Config struct {
	Max       int           // the highest limit: the route's fixed limit (required, > 0)
	Min       int           // the lowest limit (default 1)
	Initial   int           // the first limit (default min(8, Max)), raised to Min
	Tolerance float64       // latency over no-load latency at which the limit falls (default 2)
	Slack     time.Duration // and the least latency above the no-load latency at which it falls (default 10 ms)
	Window    time.Duration // how long a re-measurement of the no-load latency lasts (default 2 s)
}

// Defaults of Config's zero values.
const (
	DefaultMin       = 1
	DefaultInitial   = 8
	DefaultTolerance = 2.0
	DefaultSlack     = 10 * time.Millisecond
	DefaultWindow    = 2 * time.Second
)

// Limit is one route's adaptive limit. Its methods cost a few nanoseconds and
// allocate nothing; it is not safe for concurrent use.
type Limit struct {
	min, max  float64
	tolerance float64
	slack     time.Duration
	window    time.Duration

	limit        float64
	noLoad       time.Duration // 0 until the first sample
	lastDecrease time.Time     // samples written before it change nothing

	winStart time.Time     // the re-measurement window (zero: none yet)
	winMin   time.Duration // its lowest lone-request latency (0: none)
}

// New validates cfg, fills its defaults and returns a Limit at cfg.Initial.
func New(cfg Config) (*Limit, error) {
	if cfg.Max <= 0 {
		return nil, fmt.Errorf("%w: Max %d must be > 0", ErrInvalidConfig, cfg.Max)
	}
	if cfg.Min == 0 {
		cfg.Min = DefaultMin
	}
	if cfg.Min < 0 || cfg.Min > cfg.Max {
		return nil, fmt.Errorf("%w: Min %d must be in [1, Max %d]", ErrInvalidConfig, cfg.Min, cfg.Max)
	}
	if cfg.Initial == 0 {
		cfg.Initial = min(DefaultInitial, cfg.Max)
	}
	if cfg.Initial < 0 || cfg.Initial > cfg.Max {
		return nil, fmt.Errorf("%w: Initial %d must be in [0, Max %d]", ErrInvalidConfig, cfg.Initial, cfg.Max)
	}
	cfg.Initial = max(cfg.Initial, cfg.Min)
	if cfg.Tolerance == 0 {
		cfg.Tolerance = DefaultTolerance
	}
	if !(cfg.Tolerance > 1) {
		return nil, fmt.Errorf("%w: Tolerance %v must be > 1", ErrInvalidConfig, cfg.Tolerance)
	}
	if cfg.Slack == 0 {
		cfg.Slack = DefaultSlack
	}
	if cfg.Slack < 0 {
		return nil, fmt.Errorf("%w: Slack %v must be >= 0", ErrInvalidConfig, cfg.Slack)
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Window < 0 {
		return nil, fmt.Errorf("%w: Window %v must be > 0", ErrInvalidConfig, cfg.Window)
	}
	return &Limit{
		min: float64(cfg.Min), max: float64(cfg.Max),
		tolerance: cfg.Tolerance, slack: cfg.Slack, window: cfg.Window,
		limit: float64(cfg.Initial),
	}, nil
}

// Limit is how many requests the route may have in flight now.
func (l *Limit) Limit() int { return int(l.limit) }

// NoLoad is the no-load latency measured so far (0 before the first sample).
func (l *Limit) NoLoad() time.Duration { return l.noLoad }

// OnResponse records a request whose response head arrived at now. writtenAt
// is when its write began; inFlight is how many of the route's requests were
// in flight when it was written, itself included.
func (l *Limit) OnResponse(writtenAt, now time.Time, inFlight int) {
	latency := now.Sub(writtenAt)
	if latency <= 0 {
		return // a clock step or a sample out of order: no latency to learn
	}
	l.learn(writtenAt, now, latency, inFlight)
	if writtenAt.Before(l.lastDecrease) {
		return
	}
	switch {
	case l.late(latency):
		l.decrease(now, max(0.5, l.tolerance*float64(l.noLoad)/float64(latency)))
	case inFlight >= int(l.limit):
		l.limit = min(l.max, l.limit+1/l.limit)
	}
}

// OnTimeout records a request written at writtenAt (with inFlight of the
// route's requests in flight, itself included) whose caller gave up at now
// without a response head. When it had been in flight late (longer than
// Tolerance times the no-load latency, and Slack above it), the upstream is
// overloaded, whatever latencies it showed before, and the limit halves, once
// per round. A caller that gave up sooner (most of its time spent waiting in
// the route's queue, or a short deadline) says nothing about the upstream.
func (l *Limit) OnTimeout(writtenAt, now time.Time, inFlight int) {
	if writtenAt.Before(l.lastDecrease) || !l.late(now.Sub(writtenAt)) {
		return
	}
	l.decrease(now, 0.5)
}

// late reports whether latency is well above the no-load latency: more than
// Tolerance times it, and more than Slack above it (see the package doc).
func (l *Limit) late(latency time.Duration) bool {
	return float64(latency) > l.tolerance*float64(l.noLoad) && latency-l.noLoad > l.slack
}

func (l *Limit) decrease(now time.Time, factor float64) {
	l.limit = max(l.min, l.limit*factor)
	l.lastDecrease = now
}

// learn feeds the no-load latency: lower at once, higher by re-measurement
// over a window of lone requests (see the package doc).
func (l *Limit) learn(writtenAt, now time.Time, latency time.Duration, inFlight int) {
	if l.winStart.IsZero() {
		l.winStart = now
	} else if now.Sub(l.winStart) >= l.window {
		if l.winMin > 0 {
			l.noLoad = l.winMin
		}
		l.winStart, l.winMin = now, 0
	}
	if l.noLoad == 0 || latency < l.noLoad {
		l.noLoad = latency
	}
	if inFlight <= 1 && !writtenAt.Before(l.winStart) && (l.winMin == 0 || latency < l.winMin) {
		l.winMin = latency
	}
}
