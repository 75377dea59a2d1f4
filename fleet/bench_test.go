package fleet

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/actors"
)

// BenchmarkKeeperUsageReported measures what fleet budgets add near the
// request path: the supervisor's Send of a actors.UsageReported and the keeper's
// handling of it (a grain call only when the demand crosses a block). Each op
// is one message; the keeper's mailbox is drained before the timer stops.
func BenchmarkKeeperUsageReported(b *testing.B) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	defer sys.Shutdown()
	clock := &fakeClock{t: t0}
	g := &localGrains{sys: sys, kind: KindConfig{Lease: testLease, now: clock.now}, grains: map[string]*actor.PID{}}
	sup := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	k, err := startKeeper(keeperConfig{Budget: 64, Supervisor: sup, Logger: quiet, system: sys, granter: g, now: clock.now, noTicker: true})
	if err != nil {
		b.Fatal(err)
	}
	defer k.Stop(context.Background())
	msgs := make([]*actors.UsageReported, 16)
	for i := range msgs {
		msgs[i] = &actors.UsageReported{Route: route, Held: 8 + i%4, Idle: i % 3, Waiting: i % 2}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		sys.Root.Send(k.pid, msgs[i%len(msgs)])
	}
	if _, err := k.Snapshot(ctx); err != nil { // the keeper has handled them all
		b.Fatal(err)
	}
	b.StopTimer()
}
