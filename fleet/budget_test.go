package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/actors"
)

func TestNewRefusesABudgetItCannotKeep(t *testing.T) {
	c := unstartedCluster(t, Kind())
	noKind := unstartedCluster(t, NewKind(KindConfig{}))
	noKind.Config.Kinds = nil
	coord := func() coordinator { return newMemCoord().member() }
	for _, tc := range []struct {
		name string
		c    func() (*Budget, error)
	}{
		{"no cluster", func() (*Budget, error) { return New(nil, Options{MaxConnsPerRoute: 1, coord: coord}) }},
		{"no budget", func() (*Budget, error) { return New(c, Options{coord: coord}) }},
		{"no etcd", func() (*Budget, error) { return New(c, Options{MaxConnsPerRoute: 1}) }},
		{"a short TTL", func() (*Budget, error) {
			return New(c, Options{MaxConnsPerRoute: 1, coord: coord, SessionTTL: time.Second})
		}},
		{"no kind", func() (*Budget, error) { return New(noKind, Options{MaxConnsPerRoute: 1, coord: coord}) }},
		{"not started", func() (*Budget, error) { return New(c, Options{MaxConnsPerRoute: 1, coord: coord}) }},
	} {
		if _, err := tc.c(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", tc.name, err)
		}
	}
}

// startUnit starts a budget of budget connections on an unstarted cluster
// (local messages only) with an in-memory coordinator, and a keeper with a
// fake supervisor.
func startUnit(t *testing.T, budget int) (*Budget, actors.FleetKeeper, *supervisorLog) {
	t.Helper()
	c := unstartedCluster(t, NewKind(KindConfig{}))
	mc := newMemCoord()
	b := &Budget{c: c, opt: Options{MaxConnsPerRoute: budget, coord: mc.member}}
	sup := newSupervisorLog(c.ActorSystem)
	k, err := b.StartKeeper(actors.FleetKeeperConfig{Supervisor: sup.pid, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return b, k, sup
}

// A keeper hears the supervisor's usage, and the member's host grants it a
// share at once: the route's first connection waits for one exchange, not
// for a safe mode. Stop gives the share back and the member leaves: its
// host stops.
func TestKeeperGetsAShareForANewRouteAtOnceAndGivesItBack(t *testing.T) {
	b, k, sup := startUnit(t, 12)
	sys := b.ActorSystem()
	const route = "http://10.0.0.1:8080"
	sys.Root.Send(k.PID(), &actors.UsageReported{Route: route, Waiting: 5})
	if got := sup.awaitShare(t, route, 5); got > 12 {
		t.Fatalf("share %d, budget 12", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	snap, err := k.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Members != 1 || len(snap.Routes) != 1 || snap.Routes[0].LeaseLeft <= 0 || snap.Routes[0].Safe || snap.Routes[0].OnFloor {
		t.Fatalf("snapshot %+v, want one node and the route on a lease", snap)
	}
	m := lookupMember(sys)
	if m == nil {
		t.Fatal("no member while a keeper runs")
	}
	if err := k.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.hostDone:
	default:
		t.Fatal("the member's host still runs after its last keeper stopped")
	}
	if lookupMember(sys) != nil {
		t.Fatal("the member is still registered after its last keeper stopped")
	}
	if _, err := k.Snapshot(ctx); !errors.Is(err, ErrStopped) {
		t.Fatalf("Snapshot after Stop: %v, want ErrStopped", err)
	}
}

// Two clients with fleet budgets in one actor system share one member (one
// host, one session); the member leaves only when the second stops.
func TestKeepersOfOneSystemShareOneMember(t *testing.T) {
	b, k1, _ := startUnit(t, 12)
	sup := newSupervisorLog(b.ActorSystem())
	k2, err := b.StartKeeper(actors.FleetKeeperConfig{Supervisor: sup.pid, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	m := lookupMember(b.ActorSystem())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := k1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if lookupMember(b.ActorSystem()) != m {
		t.Fatal("the member left with the first of its two keepers")
	}
	const route = "http://10.0.0.2:8080"
	b.ActorSystem().Root.Send(k2.PID(), &actors.UsageReported{Route: route, Waiting: 1})
	sup.awaitShare(t, route, 1)
	if err := k2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if lookupMember(b.ActorSystem()) != nil {
		t.Fatal("the member stayed after its last keeper stopped")
	}
}

// A budget host activated through the cluster's identity lookup (the budget
// never asks for one) stops at once instead of hosting anything.
func TestAHostActivatedByIdentityStops(t *testing.T) {
	c := unstartedCluster(t, Kind())
	pid := c.ActorSystem.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &hostActor{} }))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stopped := make(chan struct{})
	c.ActorSystem.Root.Spawn(actor.PropsFromFunc(func(actx actor.Context) {
		switch actx.Message().(type) {
		case *actor.Started:
			actx.Watch(pid)
		case *actor.Terminated:
			close(stopped)
		}
	}))
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("a host activated outside a member did not stop")
	}
}
