package client

import (
	"errors"
	"sync/atomic"
	"time"
)

// RetryBudget bounds the replays the client makes on its own (a request that
// failed on a stale re-used connection, sent again on a new one): over a
// sliding Window, replays may be at most Ratio of the requests, and always at
// least MinPerSecond per second. Past the budget the request's error is
// returned instead of replayed, and the connactor.request.retries_refused
// metric counts it. A budget keeps a struggling server (or a broken network
// path) from being hit by a storm of replays; the defaults are Finagle's and
// Envoy's: 20% over 10 s, with a floor of 10 per second.
//
// A request whose HTTP/2 stream the server refused before processing it
// (GOAWAY above its last stream id, REFUSED_STREAM) is replayed on another
// connection up to three times whatever the budget, as the API promises that
// such refusals never surface as errors: the server never processed it, so a
// replay adds no work there and cannot amplify a load. These replays count in
// the budget's window (they leave less room for the replays that can).
//
// The zero value is the default. Disabled turns the budget off: every safe
// replay is made.
type RetryBudget struct {
	Ratio        float64       // replays allowed as a share of requests (default 0.2)
	MinPerSecond int           // replays always allowed per second (default 10)
	Window       time.Duration // the sliding window, whole seconds (default 10s, at most 60s)
	Disabled     bool          // no budget
}

func (b *RetryBudget) fill() error {
	switch {
	case b.Ratio < 0 || b.Ratio > 1:
		return errors.New("RetryBudget.Ratio is outside [0, 1]")
	case b.Window > time.Minute:
		return errors.New("RetryBudget.Window is longer than a minute")
	}
	if b.Ratio == 0 {
		b.Ratio = 0.2
	}
	if b.MinPerSecond == 0 {
		b.MinPerSecond = 10
	}
	if b.Window == 0 {
		b.Window = 10 * time.Second
	}
	b.Window = max(time.Second, b.Window.Truncate(time.Second))
	return nil
}

// retryBudget counts requests and replays in one-second buckets, lock-free:
// every request deposits one count (an atomic add on the current second's
// bucket), and only a replay reads the window. Counts that race with a
// bucket's reset may be lost, which a budget tolerates.
type retryBudget struct {
	cfg     RetryBudget
	now     func() time.Time
	buckets []bucket // one per second of the window, indexed by unix second

	allowed, refused atomic.Uint64 // totals, for Stats
}

type bucket struct {
	sec               atomic.Int64 // the unix second the counts belong to
	requests, retries atomic.Int64
}

func newRetryBudget(cfg RetryBudget) *retryBudget {
	if cfg.Disabled {
		return nil
	}
	return &retryBudget{cfg: cfg, now: time.Now, buckets: make([]bucket, int(cfg.Window/time.Second))}
}

// current returns the bucket of second sec, reset if it held an older second.
func (b *retryBudget) current(sec int64) *bucket {
	k := &b.buckets[sec%int64(len(b.buckets))]
	if old := k.sec.Load(); old != sec && k.sec.CompareAndSwap(old, sec) {
		k.requests.Store(0)
		k.retries.Store(0)
	}
	return k
}

// request counts one request, made at now (the request's start, which the
// caller has read anyway). A nil budget counts nothing.
func (b *retryBudget) request(now time.Time) {
	if b == nil {
		return
	}
	b.current(now.Unix()).requests.Add(1)
}

// allow reports whether one more replay fits the budget, and counts it if so.
func (b *retryBudget) allow() bool {
	if b == nil {
		return true
	}
	sec := b.now().Unix()
	var requests, retries int64
	for i := range b.buckets {
		k := &b.buckets[i]
		if s := k.sec.Load(); s > sec-int64(len(b.buckets)) && s <= sec {
			requests += k.requests.Load()
			retries += k.retries.Load()
		}
	}
	limit := max(b.cfg.Ratio*float64(requests), float64(b.cfg.MinPerSecond)*float64(len(b.buckets)))
	if float64(retries) >= limit {
		b.refused.Add(1)
		return false
	}
	b.current(sec).retries.Add(1)
	b.allowed.Add(1)
	return true
}

// spend counts a replay the budget must not refuse (see RetryBudget).
func (b *retryBudget) spend() {
	if b == nil {
		return
	}
	b.current(b.now().Unix()).retries.Add(1)
	b.allowed.Add(1)
}

// totals returns the replays allowed and refused so far.
func (b *retryBudget) totals() (allowed, refused uint64) {
	if b == nil {
		return 0, 0
	}
	return b.allowed.Load(), b.refused.Load()
}
