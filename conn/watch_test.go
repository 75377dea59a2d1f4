package conn

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// newWatchedActor is a connection actor outside any actor system, with a
// socket (a pipe) and nothing else: enough for its idle watch, whose functions
// the tests call in the order they want, as Receive and the timer would. The
// actor is marked stopped at the end, so that a watcher the socket's close
// ends reports nothing (there is no route to report to).
func newWatchedActor(t *testing.T) *Actor {
	t.Helper()
	c := &Actor{opt: &Options{}}
	giveSocket(t, c)
	t.Cleanup(func() {
		c.stopped.Store(true)
		c.dropSocket() // closes the socket and waits for a watcher, if one runs
	})
	return c
}

// giveSocket gives c a new socket, as a dial does.
func giveSocket(t *testing.T, c *Actor) {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { server.Close() })
	c.nc, c.br, c.bw = client, newReader(client), newWriter(client)
}

// recycle drops c's socket and resets the actor, as onRecycle does.
func recycle(c *Actor) {
	c.dropSocket()
	c.resetSocket()
}

// A timer firing that found the connection leased backs the socket's watch
// delay off. When the actor is recycled while that firing runs (it read the
// old socket's delay and has not yet doubled it), the doubling must not land
// on the next socket: its first idle period is watched after IdleWatchDelay,
// not after the old socket's doubled delay.
func TestWatchBackOffRacingARecycleLeavesTheNextSocketTheBaseDelay(t *testing.T) {
	c := newWatchedActor(t)
	c.watchDelay.Store(int64(8 * IdleWatchDelay)) // the old socket's watches were wasted before
	c.onWatchIdle()
	if err := c.stopWatch(); err != nil { // leased: the timer stays set
		t.Fatal(err)
	}
	// The timer fires now (its own goroutine, run here so that the test
	// can wait for it) and finds the connection leased.
	if !c.watchTimer.Stop() {
		t.Fatal("the timer fired before the test could fire it")
	}
	reached, proceed := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	c.opt.testHookBackOff = func() {
		if once.CompareAndSwap(false, true) { // the firing's back-off, the first
			close(reached)
			<-proceed
		}
	}
	fired := make(chan struct{})
	go func() {
		defer close(fired)
		c.fireWatch()
	}()
	<-reached // the firing read the old delay, and has not doubled it yet
	recycle(c)
	close(proceed)
	<-fired

	giveSocket(t, c)
	c.onWatchIdle() // the next socket's first idle period
	if got := time.Duration(c.watchDelay.Load()); got != IdleWatchDelay {
		t.Fatalf("the recycled actor's next socket is watched after %v, want %v", got, IdleWatchDelay)
	}
}

// A timer firing whose goroutine runs only after the actor was recycled and
// its next socket went idle (the timer had fired when dropSocket tried to stop
// it) finds an idle period it has not seen: it sees it, and sets itself again,
// but the firing was not wasted on this socket, whose delay stays
// IdleWatchDelay.
func TestWatchTimerFiringFromBeforeARecycleLeavesTheNextSocketTheBaseDelay(t *testing.T) {
	c := newWatchedActor(t)
	c.watchDelay.Store(int64(time.Minute)) // the test fires the timer, not the clock
	c.onWatchIdle()
	if !c.watchTimer.Stop() {
		t.Fatal("the timer fired before the test could fire it")
	}
	// The timer fired; its goroutine has not run yet (watchSet is still
	// true), and dropSocket cannot stop it.
	recycle(c)
	giveSocket(t, c)
	c.onWatchIdle() // the next socket's first idle period: the timer is set, it is not set again
	if !c.watchSet.Load() {
		t.Fatal("the next socket's first idle period set the timer again: the test did not arrange the race")
	}
	fired := make(chan struct{})
	go func() {
		defer close(fired)
		c.fireWatch()
	}()
	<-fired
	if got := time.Duration(c.watchDelay.Load()); got != IdleWatchDelay {
		t.Fatalf("the old socket's timer firing backed the next socket's watch delay off to %v, want %v", got, IdleWatchDelay)
	}
	if w := c.watch.Load(); w&watchStates != watchArmed || w&watchSeen == 0 {
		t.Fatalf("watch word %#x after the firing: want the period armed and seen, the timer set to watch it", w)
	}
}

// A busy connection's watches are wasted until its delay reaches
// MaxIdleWatchDelay. Once traffic slows, its watcher runs; when it has looked
// for a full delay before a lease interrupts it, the connection was idle for
// a full period and is not busy any more: its next idle period is watched
// after IdleWatchDelay again, not after MaxIdleWatchDelay.
func TestWatchThatLookedForAFullDelayGivesTheSocketItsBaseDelayBack(t *testing.T) {
	c := newWatchedActor(t)
	c.watchDelay.Store(int64(MaxIdleWatchDelay)) // busy until now: every watch was wasted
	c.onWatchIdle()                              // idle: the timer is set and has seen the period
	if !c.watchTimer.Stop() {
		t.Fatal("the timer fired before the test could fire it")
	}
	// The lease that interrupts the watcher sets the socket's read deadline
	// in the past; here it is set first, so that the watcher's peek returns
	// at once.
	c.nc.SetReadDeadline(aLongTimeAgo)
	c.fireWatch() // a full delay into the period: the watcher looks, and is interrupted
	if w := c.watch.Load(); w&watchStates != watchRunning {
		t.Fatalf("watch word %#x after the firing: want the watcher to have looked", w)
	}
	c.watchFrom = c.watchFrom.Add(-2 * MaxIdleWatchDelay) // it began to look two delays ago
	if err := c.stopWatch(); err != nil {                 // the lease that interrupted it
		t.Fatalf("stopWatch after an interrupted watcher: %v", err)
	}
	if got := time.Duration(c.watchDelay.Load()); got != IdleWatchDelay {
		t.Fatalf("after a watch of a full delay the socket's next idle period is watched after %v, want %v", got, IdleWatchDelay)
	}
}
