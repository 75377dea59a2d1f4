package fleet

import (
	"context"
	"log/slog"
	"maps"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/internal/testkit/logrec"
)

// leaveGate is a coordinator whose Leave waits until release is closed,
// after closing entered: a member's leave held at its first step.
type leaveGate struct {
	coordinator
	entered, release chan struct{}
}

func (g *leaveGate) Leave(ctx context.Context) error {
	close(g.entered)
	<-g.release
	return g.coordinator.Leave(ctx)
}

// A keeper that starts while the member's last keeper is leaving does not
// join the member that leaves (whose host hands its shards over and stops,
// and whose session ends): it waits until that member has gone, then starts
// a new one, whose host gets the name and grants.
func TestAKeeperStartedWhileItsMemberLeavesJoinsANewMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := unstartedCluster(t, NewKind(KindConfig{}))
		sys := c.ActorSystem
		mc := newMemCoord()
		gate := &leaveGate{entered: make(chan struct{}), release: make(chan struct{})}
		coords := 0
		newCoord := func() coordinator {
			coords++
			if coords == 1 {
				gate.coordinator = mc.member()
				return gate
			}
			return mc.member()
		}
		b := &Budget{c: c, opt: Options{MaxConnsPerRoute: 12, coord: newCoord}}
		sup := newSupervisorLog(sys)
		cfg := actors.FleetKeeperConfig{Supervisor: sup.pid, Logger: quiet}
		k1, err := b.StartKeeper(cfg)
		if err != nil {
			t.Fatal(err)
		}
		old := lookupMember(sys)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()

		stopped := make(chan error, 1)
		go func() { stopped <- k1.Stop(ctx) }() // the test waits for stopped
		<-gate.entered
		started := make(chan actors.FleetKeeper, 1)
		go func() { // the test waits for started
			k2, err := b.StartKeeper(cfg)
			if err != nil {
				t.Error(err)
			}
			started <- k2
		}()
		synctest.Wait()
		select {
		case <-started:
			t.Fatal("a keeper joined while its member's last keeper was leaving")
		default:
		}
		close(gate.release)
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		k2 := <-started
		if k2 == nil {
			t.FailNow()
		}
		m := lookupMember(sys)
		switch {
		case m == nil || m == old:
			t.Fatalf("the new keeper's member is %p, the one that left %p", m, old)
		case coords != 2:
			t.Fatalf("%d coordinators made, want 2 (one session per member)", coords)
		}
		select {
		case <-old.left:
		default:
			t.Fatal("the old member has not gone after its last keeper stopped")
		}
		const route = "http://10.0.0.3:8080"
		sys.Root.Send(k2.PID(), &actors.UsageReported{Route: route, Waiting: 2})
		sup.awaitShare(t, route, 2)
		if err := k2.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if lookupMember(sys) != nil {
			t.Fatal("the new member stayed after its keeper stopped")
		}
	})
}

// msgRestarted is the warning of a host or keeper actor's restart.
const msgRestarted = "fleet: an actor failed and was restarted"

// A host and a keeper that fail and are restarted (restartStrategy:
// Restarting, then Started again, with no Stopping) end the
// ticker of their first start: the member's leave, which waits for its
// goroutines, still returns when the keeper stops. Each restart is logged
// once, at WARN, with the actor's name and the panic's value. A registry of
// nil is what makes both fail here (no one sends it).
func TestARestartedHostAndKeeperLetTheMemberLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := unstartedCluster(t, NewKind(KindConfig{}))
		sys := c.ActorSystem
		mc := newMemCoord()
		b := &Budget{c: c, opt: Options{MaxConnsPerRoute: 12, coord: func() coordinator { return mc.member() }}}
		logs := &logrec.Recorder{}
		k, err := b.StartKeeper(actors.FleetKeeperConfig{Supervisor: newSupervisorLog(sys).pid, Logger: logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the session opened, the registry told
		m := lookupMember(sys)
		sys.Root.Send(m.host, &registryChanged{})
		sys.Root.Send(k.PID(), &registryChanged{})
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := k.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		outliveDeadLetterThrottle()

		restarts := logs.Find(slog.LevelWarn, msgRestarted)
		got := map[string]int{}
		for _, r := range restarts {
			got[r.Attrs["actor"]]++
			if !strings.Contains(r.Attrs["reason"], "nil pointer") {
				t.Errorf("a restart logged with the reason %q, want the panic's value", r.Attrs["reason"])
			}
		}
		if want := map[string]int{hostName: 1, k.PID().Id: 1}; !maps.Equal(got, want) {
			t.Fatalf("restarts logged by actor: %v, want %v (all logs: %v)", got, want, logs.All())
		}
	})
}

// msgStopped is the error of a host or keeper actor that failed too often.
const msgStopped = "fleet: an actor failed too often and was stopped"

// A host and a keeper that fail more than 10 times within 10 s (protoactor's
// default strategy) are stopped instead of restarted once more, and each
// stop is logged once, at ERROR, with the actor's name and the panic's
// value, after a WARN for each of the 10 restarts before it. The keeper's
// Stop still returns, and the member goes: the leave of a host that has
// stopped already waits for nothing. Time is synctest's: the 11 failures
// come within 10 s.
func TestAHostAndAKeeperThatFailTooOftenAreStoppedAndLoggedAtError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const failures = 11 // the first that stops: more than 10 in 10 s
		c := unstartedCluster(t, NewKind(KindConfig{}))
		sys := c.ActorSystem
		mc := newMemCoord()
		b := &Budget{c: c, opt: Options{MaxConnsPerRoute: 12, coord: func() coordinator { return mc.member() }}}
		logs := &logrec.Recorder{}
		k, err := b.StartKeeper(actors.FleetKeeperConfig{Supervisor: newSupervisorLog(sys).pid, Logger: logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the session opened, the registry told
		m := lookupMember(sys)
		for range failures {
			sys.Root.Send(m.host, &registryChanged{}) // a registry of nil: both fail
			sys.Root.Send(k.PID(), &registryChanged{})
		}
		synctest.Wait()
		select {
		case <-m.hostDone:
		default:
			t.Fatalf("the host still runs after %d failures (all logs: %v)", failures, logs.All())
		}
		select {
		case <-k.(*keeperHandle).a.done:
		default:
			t.Fatalf("the keeper still runs after %d failures (all logs: %v)", failures, logs.All())
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := k.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if lookupMember(sys) != nil {
			t.Error("the member stayed after its keeper stopped")
		}
		outliveDeadLetterThrottle() // messages to the stopped actors were dead letters

		for _, tc := range []struct {
			level slog.Level
			msg   string
			want  int
		}{{slog.LevelWarn, msgRestarted, failures - 1}, {slog.LevelError, msgStopped, 1}} {
			got := map[string]int{}
			for _, r := range logs.Find(tc.level, tc.msg) {
				got[r.Attrs["actor"]]++
				if !strings.Contains(r.Attrs["reason"], "nil pointer") {
					t.Errorf("%q logged with the reason %q, want the panic's value", tc.msg, r.Attrs["reason"])
				}
			}
			if want := map[string]int{hostName: tc.want, k.PID().Id: tc.want}; !maps.Equal(got, want) {
				t.Errorf("%q logged at %v by actor: %v, want %v (all logs: %v)", tc.msg, tc.level, got, want, logs.All())
			}
		}
	})
}

// A host that fails and is restarted while it hands its shards over (its
// member's last keeper is stopping) still ends the leave: the new instance
// learns from the member that it leaves, acquires nothing, and has nothing
// to hand over (what the old one was moving is bound to the member's
// session, whose end keeps it from anyone else for a lease). The keeper's
// Stop returns without waiting for its context to end.
func TestAHostRestartedWhileItLeavesEndsTheLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := unstartedCluster(t, NewKind(KindConfig{}))
		sys := c.ActorSystem
		mc := newMemCoord()
		// Transfers fail for good: the shards the leaving host hands over
		// stay moving, and its leave pending.
		tf := &transferFaults{fails: math.MaxInt, done: make(chan struct{}), tries: map[int][]time.Time{}, first: -1}
		newCoord := func() coordinator {
			tf.coordinator = mc.member()
			return tf
		}
		b := &Budget{c: c, opt: Options{MaxConnsPerRoute: 12, coord: newCoord}}
		k, err := b.StartKeeper(actors.FleetKeeperConfig{Supervisor: newSupervisorLog(sys).pid, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // alone, the host takes shards
		m := lookupMember(sys)
		other := mc.member()
		other.Open("127.0.0.1:1", nopEvents{}) // where the leaving host's shards go
		synctest.Wait()

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stopped := make(chan error, 1)
		go func() { stopped <- k.Stop(ctx) }() // the test waits for stopped
		synctest.Wait()
		tf.mu.Lock()
		tried := len(tf.tries)
		tf.mu.Unlock()
		select {
		case err := <-stopped:
			t.Fatalf("the keeper's Stop returned (%v) before the host's leave was held", err)
		default:
		}
		if tried == 0 {
			t.Fatal("the leaving host tried no transfer")
		}
		sys.Root.Send(m.host, &registryChanged{}) // a registry of nil: the host fails, and restarts
		if err := <-stopped; err != nil {
			t.Fatalf("the keeper's Stop: %v, want the leave to end once the host restarted", err)
		}
		if err := other.Close(ctx, 0); err != nil {
			t.Fatal(err)
		}
		outliveDeadLetterThrottle()
	})
}
