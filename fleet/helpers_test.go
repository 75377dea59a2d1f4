package fleet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/connactor/connactor/actors"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	return sys
}

// fakeClock is the time of a test: it moves only when the test says so.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// localGrains stands in for the cluster: one grain actor per route in a plain
// actor system, reached by RequestFuture. A test can cut it off (calls fail at
// once), make calls hang until it lets them go, or move a grain (the next call
// activates a fresh one, in safe mode).
type localGrains struct {
	sys  *actor.ActorSystem
	kind KindConfig

	mu     sync.Mutex
	grains map[string]*actor.PID
	hang   chan struct{} // non-nil: calls wait for it to close

	cut   atomic.Bool
	calls atomic.Int64
}

var errCut = errors.New("test: cluster unreachable")

func (g *localGrains) call(route string, req *structpb.Struct, timeout time.Duration) (*structpb.Struct, error) {
	g.calls.Add(1)
	g.mu.Lock()
	hang := g.hang
	pid := g.grains[route]
	if pid == nil {
		pid = g.sys.Root.Spawn(grainProps(g.kind))
		g.grains[route] = pid
	}
	g.mu.Unlock()
	if hang != nil {
		<-hang
	}
	if g.cut.Load() {
		return nil, errCut
	}
	res, err := g.sys.Root.RequestFuture(pid, req, timeout).Result()
	if err != nil {
		return nil, err
	}
	return res.(*structpb.Struct), nil
}

func (g *localGrains) move(route string) {
	g.mu.Lock()
	pid := g.grains[route]
	delete(g.grains, route)
	g.mu.Unlock()
	if pid != nil {
		g.sys.Root.StopFuture(pid).Wait()
	}
}

func (g *localGrains) hangCalls() {
	g.mu.Lock()
	g.hang = make(chan struct{})
	g.mu.Unlock()
}

func (g *localGrains) releaseCalls() {
	g.mu.Lock()
	close(g.hang)
	g.hang = nil
	g.mu.Unlock()
}

// supervisorLog is a fake supervisor: it records the actors.ShareChanged it gets.
type supervisorLog struct {
	pid *actor.PID
	ch  chan *actors.ShareChanged
}

func newSupervisorLog(sys *actor.ActorSystem) *supervisorLog {
	s := &supervisorLog{ch: make(chan *actors.ShareChanged, 1000)}
	s.pid = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*actors.ShareChanged); ok {
			s.ch <- m
		}
	}))
	return s
}

// next waits for the next actors.ShareChanged; the deadline only guards against a
// hung test.
func (s *supervisorLog) next(t *testing.T) *actors.ShareChanged {
	t.Helper()
	select {
	case m := <-s.ch:
		return m
	case <-time.After(20 * time.Second):
		t.Fatal("no actors.ShareChanged")
		return nil
	}
}

func (s *supervisorLog) none(t *testing.T) {
	t.Helper()
	select {
	case m := <-s.ch:
		t.Fatalf("unexpected %+v", m)
	default:
	}
}

// testKeeper is a keeper without ticker on a fake clock and local grains.
type testKeeper struct {
	*Keeper
	sup      *supervisorLog
	renewals chan Renewal
}

func startTestKeeper(t *testing.T, sys *actor.ActorSystem, g *localGrains, clock *fakeClock, cfg keeperConfig) *testKeeper {
	t.Helper()
	sup := newSupervisorLog(sys)
	cfg.Supervisor = sup.pid
	cfg.system = sys
	cfg.granter = g
	cfg.now = clock.now
	cfg.noTicker = true
	renewals := make(chan Renewal, 1000)
	if hook := cfg.OnRenewal; hook != nil { // the test's own hook runs first
		cfg.OnRenewal = func(r Renewal) { hook(r); renewals <- r }
	} else {
		cfg.OnRenewal = func(r Renewal) { renewals <- r }
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	k, err := startKeeper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := k.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return &testKeeper{Keeper: k, sup: sup, renewals: renewals}
}

func (k *testKeeper) usage(route string, held, idle, waiting int) {
	k.sys.Root.Send(k.pid, &actors.UsageReported{Route: route, Held: held, Idle: idle, Waiting: waiting})
}

func (k *testKeeper) tick() { k.sys.Root.Send(k.pid, tick{}) }

func (k *testKeeper) snapshot(t *testing.T) Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := k.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (k *testKeeper) route(t *testing.T, route string) RouteShare {
	t.Helper()
	for _, r := range k.snapshot(t).Routes {
		if r.Route == route {
			return r
		}
	}
	return RouteShare{Route: route}
}

// renewal waits for the keeper's next grain call outcome (Config.OnRenewal).
func (k *testKeeper) renewal(t *testing.T) Renewal {
	t.Helper()
	select {
	case r := <-k.renewals:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no grain call ended")
		return Renewal{}
	}
}
