package actors

import (
	"time"

	"github.com/connactor/connactor/route"
)

// Policies of a route that protect callers and upstreams. Each is a plain
// value owned by its route actor, table-tested on its own.

// FailFast configures a route's fast failure when its dials keep failing
// (Envoy's outlier ejection and Finagle's fail-fast, per route): after
// Threshold consecutive failed dials, the route fails calls at once with
// ErrRouteUnavailable for a cool-down, then lets one probe dial out; its
// success closes the breaker, its failure opens it again for a longer
// cool-down (doubling from Cooldown up to MaxCooldown, with ±20% jitter).
// A dial that started before the breaker last opened counts toward nothing
// when it fails: a burst's dials in flight all fail together, and each would
// otherwise open the breaker again, twice as long, with no probe between.
type FailFast struct {
	Threshold   int // consecutive dial failures that open the breaker; <= 0 = never
	Cooldown    time.Duration
	MaxCooldown time.Duration
}

type breakerState uint8

const (
	breakerClosed   breakerState = iota // dials go out
	breakerOpen                         // calls fail at once until until
	breakerHalfOpen                     // one probe dial may go out
)

// String names the state as Stats and the status page show it.
func (s breakerState) String() string {
	switch s {
	case breakerOpen:
		return route.FailFastOpen
	case breakerHalfOpen:
		return route.FailFastHalfOpen
	}
	return route.FailFastClosed
}

// breaker is a route's fail-fast state. Dials are known by their
// connection IDs, which the route gives out in increasing order.
type breaker struct {
	cfg      FailFast
	state    breakerState
	failures int       // consecutive failed dials
	opens    int       // consecutive openings without a success (for the back-off)
	until    time.Time // end of the cool-down while open
	// openedAfter is the last dial ID given out when the breaker last
	// opened: dials up to it started before, and their failures count
	// toward nothing.
	openedAfter uint64
	rejected    uint64 // calls failed fast: refused on arrival, or waiting when it opened
}

// dialVerdict is what a failed dial did to the breaker.
type dialVerdict uint8

const (
	dialCounted dialVerdict = iota // counted toward the threshold (or a failed probe's back-off)
	dialOpened                     // the breaker opened (again)
	dialIgnored                    // started before the breaker last opened: counted toward nothing
)

// allow reports whether a call may queue for a connection now. An open
// breaker whose cool-down has passed becomes half-open.
func (b *breaker) allow(now time.Time) bool {
	if b.state == breakerOpen && !now.Before(b.until) {
		b.state = breakerHalfOpen
	}
	if b.state == breakerOpen {
		b.rejected++
		return false
	}
	return true
}

// maxDials is how many dials may be in flight: one probe while half-open.
func (b *breaker) maxDials(limit int) int {
	if b.state == breakerHalfOpen {
		return 1
	}
	return limit
}

// dialFailed counts the failure of dial, lastDial being the last dial ID
// given out so far, and says what it did. Once open, the breaker counts only
// the probe's failure (the one dial half-open lets out), which opens it again
// for twice the cool-down; dials that started before it opened are ignored.
// jitter is a uniform draw in [0, 1).
func (b *breaker) dialFailed(dial, lastDial uint64, now time.Time, jitter float64) dialVerdict {
	if dial <= b.openedAfter {
		return dialIgnored
	}
	b.failures++
	if b.cfg.Threshold <= 0 || b.state != breakerHalfOpen && b.failures < b.cfg.Threshold {
		return dialCounted
	}
	d := b.cfg.Cooldown << min(b.opens, 16)
	if d > b.cfg.MaxCooldown || d <= 0 {
		d = b.cfg.MaxCooldown
	}
	d = time.Duration(float64(d) * (0.8 + 0.4*jitter))
	b.opens++
	b.state, b.until, b.openedAfter = breakerOpen, now.Add(d), lastDial
	return dialOpened
}

// dialSucceeded resets the breaker; it reports whether it was not closed.
func (b *breaker) dialSucceeded() (recovered bool) {
	recovered = b.state != breakerClosed
	b.state, b.failures, b.opens = breakerClosed, 0, 0
	return recovered
}

// idleLearner learns, per route, the idle age at which the server closes its
// connections without announcing it (no Keep-Alive header): the idle watch
// sees the server's FIN after some idle time, and a connection found stale
// when it was leased had been idle too long. The learned age is the shortest
// seen (servers close at a fixed timeout); idle connections are then retired a
// margin before it, which saves the failed writes and retries a server with a
// short keep-alive causes. Since connections are then retired before the
// server would close them, a longer timeout could never be seen: what was
// learned is forgotten after learnedFor without a new sighting, and learned
// again if the server still closes early.
type idleLearner struct {
	closedAt time.Duration // shortest idle age at which the server closed one; 0 = none seen
	seen     time.Time     // the last sighting
}

// minLearnable ignores closes of connections idle for less than this: a
// server closing a connection that quickly is not timing it out (it closes
// after each response, or restarts).
const minLearnable = 20 * time.Millisecond

// learnedFor is how long a learned idle timeout is kept without a new sighting.
const learnedFor = 10 * time.Minute

// serverClosed records that the server closed a connection idle for age.
func (l *idleLearner) serverClosed(age time.Duration, now time.Time) {
	if age < minLearnable {
		return
	}
	if l.closedAt == 0 || age < l.closedAt || now.Sub(l.seen) >= learnedFor {
		l.closedAt = age
	}
	l.seen = now
}

// learned is the server's learned idle timeout at now (0 = none, or
// forgotten: no sighting for learnedFor). A query: it changes nothing.
func (l *idleLearner) learned(now time.Time) time.Duration {
	if l.closedAt != 0 && now.Sub(l.seen) >= learnedFor {
		return 0
	}
	return l.closedAt
}

// retireAfter is the idle age after which a connection is retired: a tenth
// (at least 10 ms) before the learned timeout; 0 = nothing learned.
func (l *idleLearner) retireAfter(now time.Time) time.Duration {
	d := l.learned(now)
	if d == 0 {
		return 0
	}
	return d - max(d/10, 10*time.Millisecond)
}

// jitteredLifetime draws a connection's lifetime uniformly from [90%, 100%]
// of max (draw in [0, 1)), so that connections opened together are not all
// retired together. 0 means no limit.
func jitteredLifetime(max time.Duration, draw float64) time.Duration {
	if max <= 0 {
		return 0
	}
	return max - time.Duration(float64(max)*0.1*draw)
}
