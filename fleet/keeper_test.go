package fleet

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/actors"
)

const route = "http://10.0.0.1:8080"

func newGrains(t *testing.T, clock *fakeClock) *localGrains {
	sys := newSystem(t)
	return &localGrains{sys: sys, kind: KindConfig{Lease: testLease, now: clock.now}, grains: map[string]*actor.PID{}}
}

func TestKeeperGetsItsShareOnceTheNewGrainLeavesSafeMode(t *testing.T) {
	clock := &fakeClock{t: t0}
	g := newGrains(t, clock)
	k := startTestKeeper(t, g.sys, g, clock, keeperConfig{Budget: 10})

	k.usage(route, 0, 0, 5)
	if r := k.renewal(t); r.Err != nil || !r.Safe || r.Grant != 0 {
		t.Fatalf("first call: %+v, want grant 0 in safe mode", r)
	}
	k.sup.none(t)
	clock.advance(testLease)
	k.tick()
	if r := k.renewal(t); r.Err != nil || r.Safe || r.Grant != 6 {
		t.Fatalf("after safe mode: %+v, want 6 (5 waiting and a block of headroom)", r)
	}
	if m := k.sup.next(t); *m != (actors.ShareChanged{Route: route, Share: 6, Budget: 10}) {
		t.Fatalf("supervisor got %+v", m)
	}
}

// leased brings k to a lease of 6 on route, past the grain's safe mode.
func leased(t *testing.T, k *testKeeper, clock *fakeClock) {
	t.Helper()
	k.usage(route, 0, 0, 5)
	k.renewal(t)
	clock.advance(testLease)
	k.tick()
	if r := k.renewal(t); r.Grant != 6 {
		t.Fatalf("lease: %+v", r)
	}
	if m := k.sup.next(t); m.Share != 6 {
		t.Fatalf("supervisor got %+v", m)
	}
}

func TestKeeperKeepsItsLeaseThenFallsToTheFloorWhenTheGrainCannotBeReached(t *testing.T) {
	clock := &fakeClock{t: t0}
	g := newGrains(t, clock)
	k := startTestKeeper(t, g.sys, g, clock, keeperConfig{Budget: 10, Floor: 2})
	leased(t, k, clock)
	leaseEnds := clock.now().Add(testLease - testLease/10) // the call was sent at the current fake time

	g.cut.Store(true)
	clock.advance(testLease / 3)
	k.tick()
	if r := k.renewal(t); !errors.Is(r.Err, errCut) {
		t.Fatalf("renewal while cut: %+v", r)
	}
	// Back-offs and retries until just before the lease ends: still 6.
	for clock.now().Add(200 * time.Millisecond).Before(leaseEnds) {
		clock.advance(200 * time.Millisecond)
		k.tick()
		if r := k.route(t, route); r.Share != 6 || r.OnFloor {
			t.Fatalf("%v before the lease ends: %+v", leaseEnds.Sub(clock.now()), r)
		}
	}
	k.sup.none(t)
	clock.advance(leaseEnds.Sub(clock.now()))
	k.tick()
	if m := k.sup.next(t); m.Share != 2 {
		t.Fatalf("after the lease: %+v, want the floor 2", m)
	}
	if r := k.route(t, route); !r.OnFloor {
		t.Fatalf("snapshot: %+v, want OnFloor", r)
	}

	// Reachable again: the next call (after the back-off, at most a third of
	// a lease) gets the lease back. The clock moves only between calls.
	g.cut.Store(false)
	drain(k.renewals)
	for {
		clock.advance(testLease / 3)
		k.tick()
		if r := k.renewal(t); r.Err == nil {
			break
		}
	}
	if m := k.sup.next(t); m.Share != 6 {
		t.Fatalf("reachable again: %+v, want the lease back", m)
	}
}

func TestKeeperDefaultFloorIsTheBudgetDividedByTheMembers(t *testing.T) {
	clock := &fakeClock{t: t0}
	g := newGrains(t, clock)
	k := startTestKeeper(t, g.sys, g, clock, keeperConfig{Budget: 10})
	k.sys.Root.Send(k.pid, &membersSeen{n: 3})
	if s := k.snapshot(t); s.Floor != 3 || s.Members != 3 {
		t.Fatalf("snapshot %+v, want floor 10/3", s)
	}
	// The member count read at start loses to a topology event.
	k.sys.Root.Send(k.pid, &membersSeen{n: 5, first: true})
	if s := k.snapshot(t); s.Floor != 3 {
		t.Fatalf("snapshot %+v, want floor still 10/3", s)
	}
}

func TestKeeperAbandonsAGrainCallPastItsDeadline(t *testing.T) {
	clock := &fakeClock{t: t0}
	g := newGrains(t, clock)
	k := startTestKeeper(t, g.sys, g, clock, keeperConfig{Budget: 10, CallTimeout: time.Second})
	g.hangCalls()
	k.usage(route, 0, 0, 5)
	k.snapshot(t) // the call has started
	clock.advance(time.Second)
	k.tick()
	if r := k.renewal(t); !errors.Is(r.Err, ErrCallTimeout) || r.Took != time.Second {
		t.Fatalf("got %+v, want ErrCallTimeout after 1s", r)
	}
	var ne interface{ Timeout() bool }
	if r := (Renewal{Err: ErrCallTimeout}); !errors.As(r.Err, &ne) || !ne.Timeout() {
		t.Fatal("ErrCallTimeout is not a timeout")
	}
	// A second call starts after the back-off while the first still hangs;
	// once both end, only the second is reported (the first was, as
	// abandoned) and its answer applied.
	clock.advance(100 * time.Millisecond)
	k.tick()
	k.snapshot(t)
	g.releaseCalls()
	if r := k.renewal(t); r.Err != nil || !r.Safe {
		t.Fatalf("second call: %+v, want an answer in safe mode", r)
	}
	if got := g.calls.Load(); got != 2 {
		t.Fatalf("%d calls, want 2", got)
	}
	if r := k.route(t, route); r.Renewals != 1 || r.Failures != 1 {
		t.Fatalf("snapshot %+v, want 1 renewal and 1 failure", r)
	}
}

func TestKeeperStopGivesItsShareBackAtOnce(t *testing.T) {
	clock := &fakeClock{t: t0}
	g := newGrains(t, clock)
	a := startTestKeeper(t, g.sys, g, clock, keeperConfig{Budget: 10})
	b := startTestKeeper(t, g.sys, g, clock, keeperConfig{Budget: 10})
	a.usage(route, 0, 0, 50)
	a.renewal(t)
	clock.advance(testLease)
	a.tick()
	if r := a.renewal(t); r.Grant != 10 {
		t.Fatalf("a alone: %+v", r)
	}
	b.usage(route, 0, 0, 50)
	if r := b.renewal(t); r.Grant != 0 {
		t.Fatalf("b while a holds everything: %+v", r)
	}
	// a's connections are closed, then it stops; the grain nudges b, which
	// gets everything without any lease having expired.
	a.usage(route, 0, 0, 0)
	if err := a.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	for {
		if r := b.renewal(t); r.Grant == 10 {
			break
		}
	}
	if m := b.sup.next(t); m.Share != 10 {
		t.Fatalf("b got %+v", m)
	}
	if _, err := a.Snapshot(t.Context()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Snapshot after Stop: %v", err)
	}
}

func TestKeeperConvergesToFairSharesBetweenBusyNodes(t *testing.T) {
	clock := &fakeClock{t: t0}
	g := newGrains(t, clock)
	a := startTestKeeper(t, g.sys, g, clock, keeperConfig{Budget: 10})
	b := startTestKeeper(t, g.sys, g, clock, keeperConfig{Budget: 10})
	// Each fake supervisor holds what its share allows of a demand of 50.
	held := map[*testKeeper]int{}
	apply := func(k *testKeeper) {
		for {
			select {
			case m := <-k.sup.ch:
				held[k] = m.Share
				k.usage(route, m.Share, 0, 50-m.Share)
			default:
				return
			}
		}
	}
	// The fake clock moves only once every call begun so far has ended, so
	// that a slow machine cannot make calls look slow in fake time.
	ended := 0
	settle := func() {
		for int64(ended) < g.calls.Load() {
			select {
			case <-a.renewals:
			case <-b.renewals:
			case <-time.After(20 * time.Second):
				t.Fatalf("%d grain calls begun, %d ended", g.calls.Load(), ended)
			}
			ended++
		}
		a.snapshot(t)
		b.snapshot(t)
	}
	a.usage(route, 0, 0, 50)
	b.usage(route, 0, 0, 50)
	for range 200 {
		settle()
		clock.advance(tickInterval)
		a.tick()
		b.tick()
		settle()
		apply(a)
		apply(b)
		if held[a] == 5 && held[b] == 5 {
			return
		}
		if held[a]+held[b] > 10 {
			t.Fatalf("a holds %d, b %d: over the budget", held[a], held[b])
		}
	}
	t.Fatalf("after 10 fake seconds (3 of them in the new grain's safe mode) a holds %d, b %d; want 5 each", held[a], held[b])
}

// drain empties ch.
func drain[T any](ch chan T) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// A supervisor that restarted has lost what it was told: actors.SharesRequest makes
// the keeper tell it every share again.
func TestKeeperTellsEveryShareAgainWhenTheSupervisorAsks(t *testing.T) {
	clock := &fakeClock{t: t0}
	g := newGrains(t, clock)
	k := startTestKeeper(t, g.sys, g, clock, keeperConfig{Budget: 10})
	k.sys.Root.Send(k.pid, &actors.SharesRequest{})
	k.snapshot(t)
	k.sup.none(t) // no route yet: nothing to tell
	leased(t, k, clock)
	k.sys.Root.Send(k.pid, &actors.SharesRequest{})
	if m := k.sup.next(t); *m != (actors.ShareChanged{Route: route, Share: 6, Budget: 10}) {
		t.Fatalf("supervisor got %+v", m)
	}
}
