package client

import (
	"errors"
	"math/rand/v2"
	"runtime"
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
// The budget counts only replays of requests that may have reached the
// server. A connection found closed before anything was written to it (the
// probe before writing, or the idle watch, saw the server's close) is a bad
// idle connection, not a replay: it is discarded and the request leased
// again, as often as that happens, without counting here (net/http does the
// same).
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

// retryBudget counts requests and replays in one-second buckets, lock-free.
// Every request deposits one count in the current second's bucket, and only a
// replay reads the window (sums it). Counts that race with a bucket's reset
// may be lost, which a budget tolerates.
//
// A bucket's request count is striped: each request adds to one of a few
// counters, each on a cache line of its own, chosen at random. One counter
// written by every request of the client, on every core, costs a cache-line
// transfer per request (about 0.25 us a request on 16 cores); the budget
// needs only the sum, which a replay adds up.
type retryBudget struct {
	cfg     RetryBudget
	now     func() time.Time
	buckets []bucket // one per second of the window, indexed by unix second
	stripes uint32   // request counters per bucket: a power of two

	allowed, refused atomic.Uint64 // totals, for Stats
}

type bucket struct {
	sec      atomic.Int64 // the unix second the counts belong to
	retries  atomic.Int64
	requests []stripe // retryBudget.stripes of them
}

// stripe is one request counter on a cache line of its own (128 bytes: the
// line and the one the hardware prefetches with it).
type stripe struct {
	n atomic.Int64
	_ [120]byte
}

// maxStripes bounds the stripes of a bucket: 16 spread the writes of 16 cores
// and more, and the sum a replay reads stays short.
const maxStripes = 16

func newRetryBudget(cfg RetryBudget) *retryBudget {
	if cfg.Disabled {
		return nil
	}
	n := uint32(1)
	for n < uint32(runtime.GOMAXPROCS(0)) && n < maxStripes {
		n *= 2
	}
	b := &retryBudget{cfg: cfg, now: time.Now, buckets: make([]bucket, int(cfg.Window/time.Second)), stripes: n}
	for i := range b.buckets {
		b.buckets[i].requests = make([]stripe, n)
	}
	return b
}

// current returns the bucket of second sec, reset if it held an older second.
func (b *retryBudget) current(sec int64) *bucket {
	k := &b.buckets[sec%int64(len(b.buckets))]
	if old := k.sec.Load(); old != sec && k.sec.CompareAndSwap(old, sec) {
		for i := range k.requests {
			k.requests[i].n.Store(0)
		}
		k.retries.Store(0)
	}
	return k
}

// request counts one request, made at now (the request's start, which the
// caller has read anyway), on a stripe chosen at random (math/rand/v2's
// generator is per thread: no lock, no shared write). A nil budget counts
// nothing.
func (b *retryBudget) request(now time.Time) {
	if b == nil {
		return
	}
	k := b.current(now.Unix())
	k.requests[rand.Uint32()&(b.stripes-1)].n.Add(1)
}

// requestCount is the bucket's request count: the sum of its stripes.
func (k *bucket) requestCount() int64 {
	var n int64
	for i := range k.requests {
		n += k.requests[i].n.Load()
	}
	return n
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
			requests += k.requestCount()
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
