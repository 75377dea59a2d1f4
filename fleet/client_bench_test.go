//go:build !race

package fleet_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/fleet"
	"github.com/connactor/connactor/internal/testkit/fleettest"
)

// BenchmarkRequestPath measures what a fleet budget costs on the request
// path: the same requests, to a local server, through a connactor client in
// the same cluster member's actor system, without a fleet budget ("off") and
// with one ("on"), once the route holds its share and idle connections. The
// request path sends no cluster message and no extra message either way; the
// difference should be noise. Built without the race detector, as every test
// that runs a cluster in this process.
func BenchmarkRequestPath(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	defer srv.Close()
	logger := testLogger()
	etcd := startEtcd(b)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	cfg := cluster.Configure("fleet-bench", test.NewTestProvider(test.NewInMemAgent()), disthash.New(),
		remote.Configure("127.0.0.1", 0), cluster.WithKinds(fleet.Kind()))
	c := cluster.New(sys, cfg)
	c.StartMember()
	defer c.Shutdown(true)

	for _, mode := range []struct {
		name   string
		budget int
	}{{"off", 0}, {"on", 64}} {
		ccfg := client.Config{System: sys, Logger: logger}
		if mode.budget > 0 {
			budget, err := fleet.New(c, fleet.Options{MaxConnsPerRoute: mode.budget, Etcd: etcd})
			if err != nil {
				b.Fatal(err)
			}
			ccfg.Fleet = budget
		}
		cl, err := client.New(ccfg)
		if err != nil {
			b.Fatal(err)
		}
		hc := &http.Client{Transport: cl}
		get := func() {
			resp, err := hc.Get(srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		// Warm up: the route's first share, then connections for the
		// parallel runs.
		get()
		var warm sync.WaitGroup
		for range 4 {
			warm.Go(func() {
				for range 100 {
					get()
				}
			})
		}
		warm.Wait()
		r := fleettest.RouteOf(cl.Stats(), srv.URL)
		b.Logf("%s: route holds %d connections, share %d of %d (%s)", mode.name, r.Open, r.FleetShare, r.FleetBudget, r.FleetState)
		b.Run(mode.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				get()
			}
		})
		b.Run(mode.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					get()
				}
			})
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cl.Shutdown(ctx)
		cancel()
	}
}
