// Package codel decides when a route sheds the callers waiting in its queue:
// a pure state machine that the route actor holds and feeds inside its
// Receive. It starts no goroutine and reads no clock: every time comes in as
// an argument. It is not safe for concurrent use (its one owner is the route).
//
// # The rule
//
// It is Facebook's adaptation of CoDel (Nichols and Jacobson, "Controlling
// Queue Delay", ACM Queue, May 2012; RFC 8289) to the queues of its servers
// (Maurer, "Fail at Scale", ACM Queue, 2015): a queue that empties now and
// then is a good queue, whatever its peaks; a queue that has not been empty
// for a whole interval (default 100 ms) is a standing queue, and while it
// stands every caller that has waited longer than Target is refused, oldest
// first. Once the queue empties, the interval starts again from the caller
// who next finds it empty. So a burst that drains within the interval is
// never shed, and a standing queue is held at the target: no caller waits
// much longer than Target, however the load goes on.
//
// Only an empty queue ends a standing queue, not a short wait. CoDel's own
// packet rule stops dropping as soon as one wait falls below the target and
// needs another whole interval above it to start again; with callers, the
// refusals themselves make the next wait short (the oldest are gone), so
// that rule let the queue build for target + interval after every wave of
// refusals. A standing queue whose waits stay below the target loses no one.
//
// As in Facebook's queues and unlike CoDel's packet scheduler, every caller
// over the target is refused while the queue stands, not one at a growing
// rate: a refused caller can go elsewhere at once, and one kept waiting past
// the target is likely to give up anyway, after holding its place.
// Facebook's queues also switch to LIFO under load, so that the newest
// callers, most likely still waiting, are served first; a route keeps its
// FIFO order (first come, first served is part of its contract), and
// refusing those over the target bounds every wait instead.
//
// The route asks ShouldShed, with its oldest waiter's enqueue time, on each
// tick and after each change to its queue; ShouldShed with the zero time
// says the queue is empty. Since every change is reported, the queue was
// empty until the oldest waiter of the first look after an empty one came.
package codel

import (
	"fmt"
	"time"
)

// DefaultInterval is how long the queue must stay non-empty before anyone
// is shed: CoDel's 100 ms, a worst-case round trip.
const DefaultInterval = 100 * time.Millisecond

// Queue is one route's shedding decision. Its methods cost a few nanoseconds
// and allocate nothing; it is not safe for concurrent use.
type Queue struct {
	target, interval time.Duration
	// busySince is when the queue last stopped being empty (zero: it was
	// empty at the last look, or there was none).
	busySince time.Time
}

// New returns a Queue that sheds callers waiting longer than target once the
// queue has not been empty for interval (0: DefaultInterval).
func New(target, interval time.Duration) (*Queue, error) {
	if interval == 0 {
		interval = DefaultInterval
	}
	if target <= 0 || interval < 0 {
		return nil, fmt.Errorf("%w: target %v and interval %v must be > 0", ErrInvalidConfig, target, interval)
	}
	return &Queue{target: target, interval: interval}, nil
}

// ShouldShed records the oldest caller in the queue, enqueued at oldest (the
// zero time: the queue is empty), and says whether the route should refuse
// it now. The route refuses it and asks again with the next oldest, until
// the answer is false.
func (q *Queue) ShouldShed(now, oldest time.Time) bool {
	if oldest.IsZero() {
		q.busySince = time.Time{}
		return false
	}
	if q.busySince.IsZero() {
		q.busySince = oldest // empty until it came
	}
	return now.Sub(q.busySince) >= q.interval && now.Sub(oldest) > q.target
}

// DueAt is when the caller enqueued at oldest, the oldest in the queue, is
// to be refused if it still waits then and the queue has not emptied: the
// later of its wait passing the target and the queue standing for the
// interval. The zero time for an empty queue.
func (q *Queue) DueAt(oldest time.Time) time.Time {
	if oldest.IsZero() {
		return time.Time{}
	}
	busy := q.busySince
	if busy.IsZero() || oldest.Before(busy) {
		busy = oldest
	}
	due := oldest.Add(q.target + 1)
	if stands := busy.Add(q.interval); stands.After(due) {
		return stands
	}
	return due
}
