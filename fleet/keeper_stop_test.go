package fleet

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// Once the keeper gives its shares back, it starts no call of its own: a
// release call that failed is not retried, and a grain's nudge or a tick
// that reaches it before it stops starts nothing.
func TestKeeperStartsNoCallOnceItGivesItsSharesBack(t *testing.T) {
	clock := &fakeClock{t: t0}
	g := newGrains(t, clock)
	k := startTestKeeper(t, g.sys, g, clock, keeperConfig{Budget: 10})
	leased(t, k, clock)

	g.cut.Store(true) // the release call fails, which would make a retry due
	released := make(chan struct{})
	k.sys.Root.Send(k.pid, &releaseRequest{done: released, ctx: t.Context()})
	<-released
	if r := k.renewal(t); !errors.Is(r.Err, errCut) {
		t.Fatalf("release call: %+v, want it cut off", r)
	}
	calls := g.calls.Load()

	clock.advance(testLease) // past any back-off
	k.tick()
	k.sys.Root.Send(k.pid, renewNow{Route: route}.proto())
	k.tick()
	k.snapshot(t) // all of the above was handled
	if err := k.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := g.calls.Load(); got != calls {
		t.Fatalf("%d grain calls after the release call, want none", got-calls)
	}
}

// A Stop whose context ends before the keeper got to the release starts no
// call after it returned, neither the release nor a renewal that a message
// queued before Stop makes due: the shares expire with their leases, as after
// a crash, and the second Stop finds every goroutine ended.
func TestKeeperStartsNoCallAfterStopReturned(t *testing.T) {
	clock := &fakeClock{t: t0}
	g := newGrains(t, clock)
	var hold atomic.Bool
	entered, gate := make(chan struct{}), make(chan struct{})
	// OnRenewal runs inside the keeper's Receive: holding it stands for a
	// keeper whose mailbox is behind (a starved CPU) when Stop's context ends.
	k := startTestKeeper(t, g.sys, g, clock, keeperConfig{Budget: 10, OnRenewal: func(Renewal) {
		if hold.CompareAndSwap(true, false) {
			close(entered)
			<-gate
		}
	}})
	leased(t, k, clock)

	hold.Store(true)
	clock.advance(testLease / 3)
	k.tick() // a renewal, whose end the keeper reports and is held in
	<-entered
	clock.advance(testLease / 3)
	k.tick() // queued behind the held message: a renewal would be due
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := k.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with an ended context: %v", err)
	}
	calls := g.calls.Load()
	close(gate) // the keeper goes on: the release request, then its stop

	stopCtx, stopCancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer stopCancel()
	if err := k.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	if got := g.calls.Load(); got != calls {
		t.Fatalf("%d grain calls started after Stop returned, want none", got-calls)
	}
}
