package client

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/connactor/connactor/fleet"
)

func TestFleetKindIsTheBudgetGrain(t *testing.T) {
	if k := FleetKind(); k == nil || k.Kind != fleet.KindName {
		t.Fatalf("FleetKind() = %+v, want the kind %q", k, fleet.KindName)
	}
}

// A cluster that is configured but not started: enough to check the
// configuration (the fleet's own tests run started clusters, without the race
// detector).
func unstartedCluster(t *testing.T, kinds ...*cluster.Kind) *cluster.Cluster {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	cfg := cluster.Configure("connactor-config-test", test.NewTestProvider(test.NewInMemAgent()), disthash.New(),
		remote.Configure("127.0.0.1", 0), cluster.WithKinds(kinds...))
	return cluster.New(sys, cfg)
}

func TestNewRefusesAFleetBudgetItCannotKeep(t *testing.T) {
	withKind := unstartedCluster(t, FleetKind())
	other := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer other.Shutdown()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"a budget without a cluster", Config{FleetMaxConnsPerRoute: 10}, "needs a Cluster"},
		{"a negative budget", Config{FleetMaxConnsPerRoute: -1, Cluster: withKind}, "negative"},
		{"another actor system", Config{Cluster: withKind, System: other}, "not the Cluster's actor system"},
		{"no budget grain kind", Config{Cluster: unstartedCluster(t), FleetMaxConnsPerRoute: 10}, "FleetKind"},
		{"a cluster not started", Config{Cluster: withKind, FleetMaxConnsPerRoute: 10}, "not started"},
	} {
		c, err := New(tc.cfg)
		if err == nil {
			c.Close()
			t.Errorf("%s: New accepted it", tc.name)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidConfig saying %q", tc.name, err, tc.want)
		}
	}
}

// A Cluster without a budget is allowed: the client runs in the cluster's
// actor system, which it does not own (Close leaves it running).
func TestClientTakesTheClustersActorSystemAndLeavesItRunning(t *testing.T) {
	cl := unstartedCluster(t, FleetKind())
	c, err := New(Config{Cluster: cl})
	if err != nil {
		t.Fatal(err)
	}
	if c.pool.System() != cl.ActorSystem || c.pool.OwnsSystem() {
		t.Fatal("the client does not run in the cluster's actor system, or owns it")
	}
	if st := c.Stats(); len(st.Routes) != 0 {
		t.Fatalf("stats: %+v", st)
	}
	c.Close()
	// The system still works: an actor spawned after Close answers.
	pid := cl.ActorSystem.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(string); ok {
			ctx.Respond("pong")
		}
	}))
	if res, err := cl.ActorSystem.Root.RequestFuture(pid, "ping", 20*time.Second).Result(); err != nil || res != "pong" {
		t.Fatalf("the cluster's actor system after Close: %v %v", res, err)
	}
}
