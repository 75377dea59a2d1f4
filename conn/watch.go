package conn

import (
	"cmp"
	"time"
)

// The idle watch's word (Actor.watch): the watch's state in its low two bits,
// watchSeen, watchInherited, and the number of the connection's current idle
// period above. The actor alone starts a period (onWatchIdle, from off) and
// ends it (stopWatch, dropSocket); the timer's goroutine moves an armed period
// to seen, or to running when it becomes the watcher, each by a
// CompareAndSwap that fails if the period ended meanwhile. A firing that
// finds watchSet true again leaves the period to the firing that was set.
const (
	watchOff     uint64 = iota
	watchArmed          // the timer is set; no goroutine yet
	watchRunning        // a watcher goroutine is (or was) blocked in a peek
	watchStates  = 3    // the bits of the state

	// watchSeen says the timer has seen the current idle period: it was set
	// as the period began, or fired during it. Its next firing comes a full
	// watch delay into the period, and watches.
	watchSeen = 4
	// watchInherited says the timer may have been set for the actor's
	// previous socket: a recycle (resetSocket) sets it, and it goes when the
	// timer is set or sees a period of this socket (onWatchIdle, fireWatch).
	// A timer that fired as the actor was recycled is not stopped (its
	// goroutine may not have run yet); when it runs, it finds this socket's
	// word. Its firing was wasted for the old socket, not for this one: it
	// does not back this socket's delay off.
	watchInherited = 8
	// watchPeriod is 1 in the bits that count idle periods.
	watchPeriod = 16
)

// IdleWatchDelay is how long a connection stays idle before its socket is
// watched: at least that long, and less than twice as long (the timer fires
// on its own schedule, set once and not at every release; see onWatchIdle).
// Connections that are leased again sooner (the common case under load) cost
// no goroutine per idle period; a server's close of one of them is caught by
// the probe before the request is written (see idleProbe), and the unsent
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
//
// A watcher that ran for a full delay before a lease interrupted it was not
// wasted: the connection stayed idle that long, it is not busy any more, and
// its delay goes back to IdleWatchDelay (stopWatch). Without that, a
// connection that was busy once kept MaxIdleWatchDelay for good, and once
// traffic had slowed a server's close of it was noticed only 1 to 2 s into
// each idle period, not 10 to 20 ms.
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
// Arming costs two atomic loads and a store while the timer is set from an
// earlier idle period: no clock read and no timer reset (BenchmarkIdleWatchCycle:
// 6 to 9 ns a lease and release; 38 with a clock read on this VM).
// Resetting a timer (and stopping it at every lease) made the runtime wake
// another thread to poll for the new deadline (wakeNetPoller: a futex wake-up
// per request with one caller). Instead the timer, when it fires, watches an
// idle period it has seen at its previous firing, and sees the current one
// otherwise (fireWatch).
func (c *Actor) onWatchIdle() {
	if c.h2 != nil {
		return // HTTP/2 reads its socket all the time
	}
	w := c.watch.Load()
	if c.nc == nil || c.broken || w&watchStates != watchOff {
		return
	}
	delay := time.Duration(c.watchDelay.Load())
	if delay == 0 {
		delay = c.baseWatchDelay()
		c.watchDelay.Store(int64(delay))
	}
	c.makeWatch()
	// Nothing but the actor changes an off word: a plain store starts the
	// next period. It comes before the look at watchSet: a firing that
	// clears watchSet after that look finds the period armed.
	next := w&^(watchStates|watchSeen) + watchPeriod | watchArmed
	c.watch.Store(next)
	if !c.watchSet.Load() && c.watchSet.CompareAndSwap(false, true) {
		// The timer is set now, for this socket: it fires a full delay into
		// the period, which it has seen (unless a firing still running marked
		// it first).
		c.watch.CompareAndSwap(next, next&^watchInherited|watchSeen)
		c.watchTimer.Reset(delay)
	}
}

// makeWatch makes the watch's timer and channel, once per actor: when its
// first socket is dialed (onDialResult), on the dial worker, which lives
// where the client does. Made by the first idle period's release instead, on
// a caller's goroutine, they would belong to that caller's testing/synctest
// bubble, if it is in one, and the timer's goroutine and the actor, outside
// it, could neither use the channel nor stop the timer.
func (c *Actor) makeWatch() {
	if c.watchTimer == nil {
		// Made stopped and set by onWatchIdle, so that the field is written
		// before the timer can fire (fireWatch reads it to set itself again).
		c.watchDone = make(chan struct{}, 1)
		c.watchTimer = time.AfterFunc(time.Hour, c.fireWatch)
		c.watchTimer.Stop()
	}
}

// fireWatch runs on the timer's goroutine. While the connection is leased
// (the watch is off) it leaves the timer unset; when the connection is idle
// in a period the timer has not seen (it was leased since the timer was set,
// and idle again) it marks the period seen and sets the timer again; both
// times the firing, a goroutine, was wasted: the socket's watch delay
// doubles, unless the timer was set for the actor's previous socket
// (watchInherited). In a period it has seen, a full delay old, it becomes the
// watcher, unless a lease (or a stop) ended the period first. The watcher is
// owned by the connection actor: stopWatch and onStopping wait for it.
func (c *Actor) fireWatch() {
	c.watchSet.Store(false)
	for {
		w := c.watch.Load()
		if c.watchSet.Load() {
			return // set again by onWatchIdle since: that firing watches
		}
		switch {
		case w&watchStates != watchArmed:
			if w&watchInherited == 0 {
				c.backOffWatch()
			}
			return
		case w&watchSeen == 0:
			if !c.watch.CompareAndSwap(w, w&^watchInherited|watchSeen) {
				continue // the period ended meanwhile
			}
			if w&watchInherited == 0 {
				c.backOffWatch()
			}
			if c.watchSet.CompareAndSwap(false, true) { // not set again by onWatchIdle meanwhile
				c.watchTimer.Reset(time.Duration(c.watchDelay.Load()))
			}
			return
		}
		if c.watch.CompareAndSwap(w, w&^watchStates|watchRunning) {
			break
		}
	}
	c.watchFrom = time.Now() // one clock read a watcher: stopWatch tells a long watch from a wasted one
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

// disarmWatch ends the current idle period when its watch is armed (seen or
// not): the timer stays set, and when it fires, fireWatch finds the watch
// off. It reports whether a watcher runs instead, which the caller must
// interrupt or wait for, and then turn off (watchOver).
func (c *Actor) disarmWatch() (running bool) {
	for {
		w := c.watch.Load()
		switch w & watchStates {
		case watchOff:
			return false
		case watchRunning:
			return true
		}
		if c.watch.CompareAndSwap(w, w&^(watchStates|watchSeen)) {
			return false
		}
	}
}

// watchOver turns the watch off once its watcher has signalled watchDone.
func (c *Actor) watchOver() {
	c.watch.And(^uint64(watchStates | watchSeen))
}

// stopWatch ends the idle watch before an exchange; it returns the error that
// makes the connection unusable, if the watcher saw one. A watch that is armed
// but not yet looking is simply disarmed: the exchange then probes the socket
// itself (checkIdle) before writing anything. A watcher it interrupts backs
// the socket's delay off, unless it had watched for a full delay: then the
// connection is no longer busy, and the delay goes back to IdleWatchDelay.
func (c *Actor) stopWatch() error {
	if c.watchTimer == nil || !c.disarmWatch() {
		return nil
	}
	c.nc.SetReadDeadline(aLongTimeAgo)
	<-c.watchDone
	c.watchOver()
	c.nc.SetReadDeadline(time.Time{})
	if err := c.watchErr; !isTimeout(err) {
		c.broken = true
		return err
	}
	if time.Since(c.watchFrom) >= time.Duration(c.watchDelay.Load()) {
		c.watchDelay.Store(int64(c.baseWatchDelay())) // idle for a full period: not busy any more
		return nil
	}
	c.backOffWatch() // this watch was wasted: look later next time
	return nil
}

// baseWatchDelay is a socket's first idle watch delay: Options.IdleWatchDelay,
// or IdleWatchDelay.
func (c *Actor) baseWatchDelay() time.Duration { return cmp.Or(c.opt.IdleWatchDelay, IdleWatchDelay) }

// backOffWatch doubles the socket's watch delay, up to MaxIdleWatchDelay (or
// Options.IdleWatchDelay when that is longer), after a wasted watch. The
// actor and the timer's goroutine may both call it at once: one of the two
// doublings may be lost, which only delays the back-off.
//
// The doubling is a CompareAndSwap of the delay it read: the timer's
// goroutine may call it as the actor is recycled (the timer fired just before
// dropSocket, which cannot stop it then), and a plain store after
// resetSocket's would hand the next socket the old one's doubled delay. The
// swap fails instead, and the next socket starts with IdleWatchDelay. (Only a
// goroutine held between its read and its swap until the next socket has gone
// idle at the very delay it read would double that socket's delay: once, as a
// firing that found it leased does.)
func (c *Actor) backOffWatch() {
	d := c.watchDelay.Load()
	if hook := c.opt.testHookBackOff; hook != nil {
		hook()
	}
	c.watchDelay.CompareAndSwap(d, int64(min(2*time.Duration(d), max(MaxIdleWatchDelay, c.opt.IdleWatchDelay))))
}
