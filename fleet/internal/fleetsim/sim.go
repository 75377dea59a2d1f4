// Package fleetsim runs the fleet budget protocol's own code (the ledgers,
// hosts and keepers of fleet/internal/protocol) against a simulated clock and
// network in one process, deterministic from a seed: N members, each a ledger
// host and a keeper with a connection pool per route, a simulated etcd
// (sessions with a TTL, the registry, shard owners taken by compare-and-swap),
// messages delayed and lost at random, and a timeline of faults: demand that
// shifts, rolling restarts, a partition, a host crash, an etcd outage. It
// checks the budget at every event and measures convergence, fairness,
// messages and the hosts' CPU per request.
package fleetsim

import (
	"math/rand/v2"
	"time"
)

// t0 is the simulated clock's origin.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type event struct {
	at  int64 // nanoseconds since t0
	seq uint64
	fn  func()
}

// queue is a binary min-heap of events by time, then by order of
// scheduling (hand-written: container/heap's interface calls cost a third of
// a large run).
type queue []event

func (q queue) less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}

func (q *queue) push(e event) {
	*q = append(*q, e)
	h := *q
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *queue) pop() event {
	h := *q
	e := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = event{}
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return e
}

// clock is the simulation's time and its events.
type clock struct {
	now time.Time
	q   queue
	seq uint64
	rng *rand.Rand
}

func (c *clock) at(t time.Time, fn func()) {
	c.seq++
	c.q.push(event{at: int64(t.Sub(t0)), seq: c.seq, fn: fn})
}

func (c *clock) after(d time.Duration, fn func()) { c.at(c.now.Add(d), fn) }

// run handles events until the clock reaches until; check runs after each.
func (c *clock) run(until time.Time, check func()) {
	end := int64(until.Sub(t0))
	for len(c.q) > 0 && c.q[0].at < end {
		e := c.q.pop()
		c.now = t0.Add(time.Duration(e.at))
		e.fn()
		check()
	}
	c.now = until
}

// network delivers messages between members and to etcd: each takes a delay
// drawn uniformly from [minDelay, maxDelay], and is lost with probability
// loss; nothing crosses a partition's edge.
type network struct {
	c                  *clock
	minDelay, maxDelay time.Duration
	loss               float64
}

func (n *network) delay() time.Duration {
	return n.minDelay + time.Duration(n.c.rng.Int64N(int64(n.maxDelay-n.minDelay)+1))
}

func (n *network) lost() bool { return n.loss > 0 && n.c.rng.Float64() < n.loss }
