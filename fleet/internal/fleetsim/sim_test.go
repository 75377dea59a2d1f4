package fleetsim

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/connactor/connactor/fleet/internal/protocol"
)

// The full timeline at ten members, a few seeds: the budget is never
// exceeded, and the fleet converges within three leases after every change
// but the etcd outage (during which it falls to its floors, then nothing).
func TestSimulatedFleetHoldsTheBudgetAndConverges(t *testing.T) {
	seeds := 4
	if testing.Short() {
		seeds = 1
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := New(Config{Seed: seed, Members: 10, Routes: 100}.Timeline()).Run()
			if r.MaxOver != 0 {
				t.Errorf("the budget was exceeded by up to %d, %d times, first at %v", r.MaxOver, r.OverEvents, r.FirstOver)
			}
			for _, c := range r.Changes {
				if c.What == "etcd down" {
					continue
				}
				if !c.Settled || c.Converge > 3*protocol.DefaultLease {
					t.Errorf("%v %s: converged after %v (settled %v), want within three leases", c.At, c.What, c.Converge, c.Settled)
				}
			}
			if r.Jain < 0.9 {
				t.Errorf("Jain's index %.3f, want at least 0.9", r.Jain)
			}
			t.Logf("util %.3f, Jain %.3f (lowest %.3f), %.1f messages per member a second", r.Util, r.Jain, r.JainMin, r.MsgsPerMember)
		})
	}
}

// A run is a function of its seed: the same seed gives the same figures
// (but the hosts' CPU time, read from the machine's clock).
func TestSimulationIsDeterministic(t *testing.T) {
	cfg := Config{Seed: 42, Members: 10, Routes: 100, Duration: 100 * time.Second}.Timeline()
	a, b := New(cfg).Run(), New(cfg).Run()
	a.CPUPerRequest, b.CPUPerRequest = 0, 0
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs of seed 42 differ:\n%+v\n%+v", a, b)
	}
}

// etcd down for 15 s, then back, while every member's client finds it again
// after a back-off of up to 15 s (so some sessions expire after the restart
// and their members register again, their ledgers taken over): over many
// seeds, sizes and budgets, the budget is never exceeded. This is the
// three-process etcd-restart scenario (make fleet-etcd-restart) in
// simulation, where it runs in a second.
func TestSimulatedEtcdRestartsNeverExceedTheBudget(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 50
	}
	over := 0
	for seed := range uint64(seeds) {
		cfg := Config{Seed: seed, Members: 3 + int(seed%5), Routes: 1 + int(seed%3), Callers: 32, Budget: 8 + int(seed%9),
			Duration: 80 * time.Second, Loss: 0.01, EtcdDownAt: 30 * time.Second, EtcdReconnect: time.Duration(1+seed%15) * time.Second}
		if r := New(cfg).Run(); r.MaxOver > 0 {
			over++
			t.Errorf("seed %d (%d members, budget %d): over the budget by %d, %d times, first at %v",
				seed, cfg.Members, cfg.Budget, r.MaxOver, r.OverEvents, r.FirstOver)
		}
	}
	t.Logf("%d runs, %d over the budget", seeds, over)
}

// The whole timeline, many seeds, a few sizes: the budget is never exceeded.
func TestSimulatedTimelineNeverExceedsTheBudget(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	for seed := range uint64(seeds) {
		cfg := Config{Seed: 1000 + seed, Members: 4 + int(seed%4)*6, Routes: 5 + int(seed%3)*20, Callers: 12,
			Budget: 6 + int(seed%5)*5, Duration: 290 * time.Second}.Timeline()
		if r := New(cfg).Run(); r.MaxOver > 0 {
			t.Errorf("seed %d (%d members, %d routes, budget %d): over the budget by %d, %d times, first at %v",
				cfg.Seed, cfg.Members, cfg.Routes, cfg.Budget, r.MaxOver, r.OverEvents, r.FirstOver)
		}
	}
}
