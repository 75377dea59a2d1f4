package conn

import (
	"cmp"
	"time"
)

// Idle watch states.
const (
	watchOff     int32 = iota
	watchArmed         // the timer is set; no goroutine yet
	watchRunning       // a watcher goroutine is (or was) blocked in a peek
)

// IdleWatchDelay is how long a connection stays idle before its socket is
// watched. Connections that are leased again sooner (the common case under load)
// cost no goroutine per idle period; a server's close of one of them is caught
// by the probe before the request is written (see idleProbe), and the unsent
// request is retried.
//
// A watch that was wasted doubles the socket's delay before the next, up to
// MaxIdleWatchDelay: a watcher a lease had to interrupt (a peek blocked, then a
// past read deadline, a wake-up and a deadline reset: several µs), and a timer
// firing that found the connection used since it was set (a goroutine that
// only sets the timer again). Connections re-used every few tens of
// milliseconds, as when requests spread over hundreds of routes, stop paying
// for a watch at every idle gap, and busy ones for a timer goroutine every 10
// ms (0.03 goroutines a request with 16 busy connections, BenchmarkLeaseReleaseCycle);
// the probe still finds a server's close before anything is written.
const (
	IdleWatchDelay    = 10 * time.Millisecond
	MaxIdleWatchDelay = time.Second
)

// onWatchIdle arms the idle watch of a connection that has just become idle: after
// the socket's watch delay (IdleWatchDelay, or longer, see watchDelay) a
// goroutine blocks in a one-byte peek. A server's close (EOF) or
// unsolicited bytes wake it, and it tells the route, so a dead connection leaves
// the idle list before anyone leases it (the idea of Lwan's EPOLLRDHUP watch).
// The exchange that leases the connection disarms the watch or, if
// the watcher runs, interrupts it with a past read deadline.
//
// Arming costs a clock read and two atomic stores while the timer is set from
// an earlier idle period: resetting a timer (and stopping it at every lease)
// made the runtime wake another thread to poll for the new deadline
// (wakeNetPoller: a futex wake-up per request with one caller).
func (c *Actor) onWatchIdle() {
	if c.h2 != nil {
		return // HTTP/2 reads its socket all the time
	}
	if c.nc == nil || c.broken || c.watchState.Load() != watchOff {
		return
	}
	delay := time.Duration(c.watchDelay.Load())
	if delay == 0 {
		delay = cmp.Or(c.opt.IdleWatchDelay, IdleWatchDelay)
		c.watchDelay.Store(int64(delay))
	}
	c.watchDue.Store(monoNow() + int64(delay))
	c.watchState.Store(watchArmed)
	if c.watchTimer == nil {
		// Made stopped and set below, so that the field is written before
		// the timer can fire (fireWatch reads it to set itself again).
		c.watchDone = make(chan struct{}, 1)
		c.watchTimer = time.AfterFunc(time.Hour, c.fireWatch)
		c.watchTimer.Stop()
	}
	if c.watchSet.CompareAndSwap(false, true) {
		c.watchTimer.Reset(delay)
	}
}

// fireWatch runs on the timer's goroutine. While the connection is leased
// (the watch is off) it leaves the timer unset; while the current idle
// period's watch is not yet due it sets the timer again for then; both
// times the connection was used since the timer was set, and the firing,
// a goroutine, was wasted: the socket's watch delay doubles. Once due, it
// becomes the watcher, unless a lease (or a stop) disarmed the watch first.
// The watcher is owned by the connection actor: stopWatch and onStopping
// wait for it.
func (c *Actor) fireWatch() {
	c.watchSet.Store(false)
	if c.watchState.Load() != watchArmed {
		c.backOffWatch()
		return
	}
	if wait := c.watchDue.Load() - monoNow(); wait > 0 {
		c.backOffWatch()
		if c.watchSet.CompareAndSwap(false, true) { // not set again by onWatchIdle meanwhile
			c.watchTimer.Reset(time.Duration(wait))
		}
		return
	}
	if !c.watchState.CompareAndSwap(watchArmed, watchRunning) {
		return
	}
	_, err := c.br.Peek(1)
	interrupted := isTimeout(err)
	if err == nil {
		err = errUnsolicited
	}
	c.watchErr = err
	// What the report needs is read before watchDone: once it is signalled,
	// the actor may be recycled for another socket (onRecycle) and change id.
	sys, parent, id := c.sys, c.parent, c.id
	c.watchDone <- struct{}{}
	if !interrupted && !c.stopped.Load() {
		// The route closes it. When the actor is stopping, its own Stopping
		// closed the socket and the route may be gone: nothing to report. A
		// report for a recycled actor's previous socket carries that socket's
		// ID, which the route no longer knows.
		sys.Root.Send(parent, &IdleBroken{ID: id, Err: err})
	}
}

// stopWatch ends the idle watch before an exchange; it returns the error that
// makes the connection unusable, if the watcher saw one. A watch that is armed
// but not yet looking is simply disarmed: the exchange then probes the socket
// itself (checkIdle) before writing anything.
func (c *Actor) stopWatch() error {
	if c.watchTimer == nil {
		return nil
	}
	if c.watchState.CompareAndSwap(watchArmed, watchOff) {
		return nil // the timer stays set: when it fires, fireWatch finds the watch off
	}
	if c.watchState.Load() != watchRunning {
		return nil
	}
	c.nc.SetReadDeadline(aLongTimeAgo)
	<-c.watchDone
	c.watchState.Store(watchOff)
	c.nc.SetReadDeadline(time.Time{})
	if err := c.watchErr; !isTimeout(err) {
		c.broken = true
		return err
	}
	c.backOffWatch() // this watch was wasted: look later next time
	return nil
}

// backOffWatch doubles the socket's watch delay, up to MaxIdleWatchDelay (or
// Options.IdleWatchDelay when that is longer), after a wasted watch. The
// actor and the timer's goroutine may both call it at once: one of the two
// doublings may be lost, which only delays the back-off.
func (c *Actor) backOffWatch() {
	d := time.Duration(c.watchDelay.Load())
	c.watchDelay.Store(int64(min(2*d, max(MaxIdleWatchDelay, c.opt.IdleWatchDelay))))
}

// monoBase is the origin of monoNow.
var monoBase = time.Now()

// monoNow is the monotonic clock in nanoseconds since monoBase (the idle
// watch's due times, shared with the timer goroutine as one atomic integer).
func monoNow() int64 { return int64(time.Since(monoBase)) }
