// Package codel decides when a route sheds the callers waiting in its queue:
// a pure state machine that the route actor holds and feeds inside its
// Receive. It starts no goroutine and reads no clock: every time comes in as
// an argument. It is not safe for concurrent use (its one owner is the route).
//
// # The rule
//
// It is CoDel's (Nichols and Jacobson, "Controlling Queue Delay", ACM Queue,
// May 2012; RFC 8289), as Facebook applies it to the queues of its servers
// (Maurer, "Fail at Scale", ACM Queue, 2015): a queue that drains now and
// then is a good queue, whatever its peaks; a queue whose shortest wait stays
// above a target for a whole interval is a standing queue, and only then is
// anything shed. While the shortest wait stays above Target for Interval
// (default 100 ms), callers that have waited longer than Target are refused,
// oldest first, until a wait below Target is seen (the queue emptied, a
// caller left it sooner, or the oldest left in it has waited less). A burst
// that drains within the interval is never shed. As in Facebook's queues and
// unlike CoDel's packet scheduler, every caller over the target is refused
// while shedding, not one at a growing rate: a refused caller can go
// elsewhere at once, and one kept waiting past the target is likely to give
// up anyway, after holding its place. Facebook's queues also switch to LIFO
// under load, so that the newest callers, most likely still waiting, are
// served first; a route keeps its FIFO order (first come, first served is
// part of its contract), and refusing those over the target bounds every
// wait instead.
//
// The route reports each wait it sees: OnDequeue when a caller leaves the
// queue to be served, and ShouldShed, with its oldest waiter's enqueue time,
// on each tick and after each change to its queue; ShouldShed with the zero
// time says the queue is empty. The oldest waiter's wait so far is a wait
// the queue has (no one in it has waited longer), so a queue that nobody
// leaves is still judged.
package codel

import (
	"fmt"
	"time"
)

// DefaultInterval is how long the shortest wait must stay above the target
// before anyone is shed: CoDel's 100 ms, a worst-case round trip.
const DefaultInterval = 100 * time.Millisecond

// Queue is one route's shedding decision. Its methods cost a few nanoseconds
// and allocate nothing; it is not safe for concurrent use.
type Queue struct {
	target, interval time.Duration
	// aboveSince is when the waits went above target with none below since
	// (zero: the last wait seen was below it).
	aboveSince time.Time
}

// New returns a Queue that sheds callers waiting longer than target once the
// shortest wait has stayed above it for interval (0: DefaultInterval).
func New(target, interval time.Duration) (*Queue, error) {
	if interval == 0 {
		interval = DefaultInterval
	}
	if target <= 0 || interval < 0 {
		return nil, fmt.Errorf("%w: target %v and interval %v must be > 0", ErrInvalidConfig, target, interval)
	}
	return &Queue{target: target, interval: interval}, nil
}

// OnDequeue records a caller that left the queue at now to be served, after
// waiting since enqueuedAt.
func (q *Queue) OnDequeue(now, enqueuedAt time.Time) { q.observe(now, now.Sub(enqueuedAt)) }

// ShouldShed records the wait of the oldest caller in the queue, enqueued at
// oldest (the zero time: the queue is empty), and says whether the route
// should refuse it now. The route refuses it and asks again with the next
// oldest, until the answer is false.
func (q *Queue) ShouldShed(now, oldest time.Time) bool {
	if oldest.IsZero() {
		q.aboveSince = time.Time{}
		return false
	}
	wait := now.Sub(oldest)
	q.observe(now, wait) // a wait at or below the target ends shedding here
	return !q.aboveSince.IsZero() && now.Sub(q.aboveSince) >= q.interval
}

func (q *Queue) observe(now time.Time, wait time.Duration) {
	switch {
	case wait <= q.target:
		q.aboveSince = time.Time{}
	case q.aboveSince.IsZero():
		q.aboveSince = now
	}
}
