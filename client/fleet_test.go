package client

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/actors"
)

// fakeFleet is a FleetBudget without a cluster: its keeper is an actor that
// records what the supervisor tells it and answers a SharesRequest with the
// shares the test set. The fleet's own tests run the real one.
type fakeFleet struct {
	sys      *actor.ActorSystem
	budget   int
	shares   map[string]int // the keeper's shares by route
	startErr error

	started chan actors.FleetKeeperConfig
	usage   chan actors.UsageReported
	stopped chan struct{} // closed by the keeper's Stop
}

func newFakeFleet(t *testing.T, budget int, shares map[string]int) *fakeFleet {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	return &fakeFleet{sys: sys, budget: budget, shares: shares, started: make(chan actors.FleetKeeperConfig, 1),
		usage: make(chan actors.UsageReported, 64), stopped: make(chan struct{})}
}

func (f *fakeFleet) ActorSystem() *actor.ActorSystem { return f.sys }
func (f *fakeFleet) MaxConnsPerRoute() int           { return f.budget }

func (f *fakeFleet) StartKeeper(cfg actors.FleetKeeperConfig) (actors.FleetKeeper, error) {
	if f.startErr != nil {
		return nil, f.startErr
	}
	f.started <- cfg
	pid := f.sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actors.SharesRequest:
			for route, share := range f.shares {
				ctx.Send(cfg.Supervisor, &actors.ShareChanged{Route: route, Share: share, Budget: f.budget})
			}
		case *actors.UsageReported:
			select {
			case f.usage <- *m:
			default:
			}
		}
	}))
	return &fakeKeeper{f: f, pid: pid}, nil
}

type fakeKeeper struct {
	f   *fakeFleet
	pid *actor.PID
}

func (k *fakeKeeper) PID() *actor.PID { return k.pid }

func (k *fakeKeeper) Snapshot(context.Context) (actors.FleetSnapshot, error) {
	s := actors.FleetSnapshot{Members: 3}
	for route := range k.f.shares {
		s.Routes = append(s.Routes, actors.FleetRoute{Route: route, LeaseLeft: time.Second, LastRenewal: time.Millisecond})
	}
	return s, nil
}

func (k *fakeKeeper) Stop(context.Context) error {
	close(k.f.stopped)
	k.f.sys.Root.Stop(k.pid)
	return nil
}

func TestNewRefusesAFleetItCannotKeep(t *testing.T) {
	other := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer other.Shutdown()
	broken := newFakeFleet(t, 6, nil)
	broken.startErr = errors.New("the keeper cannot start")
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"another actor system", Config{Fleet: newFakeFleet(t, 6, nil), System: other}, "not the Fleet's actor system"},
		{"a keeper that does not start", Config{Fleet: broken}, "the keeper cannot start"},
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

// The client runs in the fleet's actor system, which it does not own: its
// keeper learns the supervisor's PID, the supervisor enforces the shares the
// keeper tells it, Stats reads the keeper's view, and Close stops the keeper
// after the supervisor but leaves the system running.
func TestClientKeepsItsFleetShareThroughTheKeeper(t *testing.T) {
	srv := newServer(t, nil, hello)
	route := srv.URL // "http://127.0.0.1:port", as route.Key.String() spells it
	f := newFakeFleet(t, 6, map[string]int{route: 2})
	c, err := New(Config{Fleet: f, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if c.pool.System() != f.sys || c.pool.OwnsSystem() {
		t.Fatal("the client does not run in the fleet's actor system, or owns it")
	}
	// The keeper's ShareChanged reaching the supervisor (the share enforced,
	// below) shows that it was told the client's supervisor.
	if cfg := <-f.started; cfg.Supervisor == nil || !strings.HasPrefix(cfg.Supervisor.Id, "connactor-supervisor") {
		t.Fatalf("the keeper was told the supervisor %v", cfg.Supervisor)
	}
	if got := get(t, c, srv.URL+"/"); got != "hello" {
		t.Fatalf("GET: %q", got)
	}
	waitFor(t, "the share enforced", func() bool {
		st := c.Stats()
		return len(st.Routes) == 1 && st.Routes[0].FleetShare == 2
	})
	st := c.Stats()
	r := st.Routes[0]
	if r.FleetBudget != 6 || r.FleetState != FleetLease || r.FleetRenewal != time.Millisecond || st.FleetMembers != 3 {
		t.Errorf("fleet stats %+v (members %d), want share 2 of 6 on a lease, renewal 1ms, 3 members", r, st.FleetMembers)
	}
	if u := <-f.usage; u.Route != route {
		t.Errorf("usage reported for %q, want %q", u.Route, route)
	}
	c.Close()
	select {
	case <-f.stopped:
	default:
		t.Fatal("Close did not stop the keeper")
	}
	// The system still works: an actor spawned after Close answers.
	pid := f.sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(string); ok {
			ctx.Respond("pong")
		}
	}))
	if res, err := f.sys.Root.RequestFuture(pid, "ping", 20*time.Second).Result(); err != nil || res != "pong" {
		t.Fatalf("the fleet's actor system after Close: %v %v", res, err)
	}
}
