//go:build !race

// The in-process cluster tests: three members of a protoactor cluster in this
// process (the test provider, disthash), each with a keeper and a fake
// supervisor (fleettest.Pool) holding connections to one shared upstream. They
// are built without the race detector only: protoactor's cluster has data
// races of its own (RACES.md). Run them with
//
//	go test -count=1 -run '^TestCluster' ./fleet/
package fleet_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/connactor/connactor/fleet"
	"github.com/connactor/connactor/fleet/fleettest"
)

// testLogger is quiet unless FLEET_TEST_LOG is set: a cluster logs a lot.
func testLogger() *slog.Logger {
	if os.Getenv("FLEET_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// inProcess is a cluster of members in this process, each with a keeper and
// a pool, all against one upstream and one socket counter.
type inProcess struct {
	t        testing.TB
	budget   int
	agent    *test.InMemAgent
	upstream *fleettest.Upstream
	counter  *fleettest.Counter
	changed  chan struct{}
	members  []*inMember

	mu        sync.Mutex
	hosts     []int // the member index of each grain activation, in order
	activated chan struct{}
	leaving   sync.WaitGroup // members leaving in the background
}

type inMember struct {
	i      int
	c      *cluster.Cluster
	keeper *fleet.Keeper
	pool   *fleettest.Pool
	end    sync.Once // a member leaves or crashes once
}

type memberSpec struct {
	callers int
	floor   int
}

func startInProcess(t testing.TB, budget int, specs ...memberSpec) *inProcess {
	t.Helper()
	up, err := fleettest.NewUpstream(2 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	f := &inProcess{
		t: t, budget: budget, agent: test.NewInMemAgent(), upstream: up, counter: &fleettest.Counter{},
		changed: make(chan struct{}, 1), activated: make(chan struct{}, 1),
	}
	t.Cleanup(f.stop)
	name := fmt.Sprintf("fleet-test-%d", time.Now().UnixNano())
	// One after another: a member that joins while another starts can be
	// missed (PROTOACTOR.md).
	for i, spec := range specs {
		f.members = append(f.members, f.startMember(i, name, spec))
	}
	for _, m := range f.members {
		m.pool.Start(m.keeper.PID())
	}
	return f
}

func (f *inProcess) startMember(i int, name string, spec memberSpec) *inMember {
	logger := testLogger()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	kind := fleet.NewKind(fleet.KindConfig{OnActivated: func(string) {
		f.mu.Lock()
		f.hosts = append(f.hosts, i)
		f.mu.Unlock()
		select {
		case f.activated <- struct{}{}:
		default:
		}
	}})
	cfg := cluster.Configure(name, test.NewTestProvider(f.agent), disthash.New(), remote.Configure("127.0.0.1", 0), cluster.WithKinds(kind))
	c := cluster.New(sys, cfg)
	c.StartMember()
	m := &inMember{i: i, c: c}
	m.pool = fleettest.NewPool(fleettest.PoolConfig{
		System: sys, Route: f.upstream.URL(), Addr: f.upstream.Addr(), Callers: spec.callers,
		Counter: f.counter, Logger: logger, Changed: f.changed,
	})
	k, err := fleet.New(fleet.Config{Cluster: c, Budget: f.budget, Supervisor: m.pool.PID(), Floor: spec.floor, Logger: logger})
	if err != nil {
		f.t.Fatal(err)
	}
	m.keeper = k
	return m
}

// leave stops m as a service that shuts down does: its pool closes its
// connections, its keeper gives the share back, its cluster member leaves.
func (f *inProcess) leave(m *inMember) {
	m.end.Do(func() { f.leaveNow(m) })
}

func (f *inProcess) leaveNow(m *inMember) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.pool.Stop(ctx); err != nil {
		f.t.Errorf("member %d: pool: %v", m.i, err)
	}
	if err := m.keeper.Stop(ctx); err != nil {
		f.t.Errorf("member %d: keeper: %v", m.i, err)
	}
	m.c.Shutdown(true)
}

// crash stops m as a process that dies does: its sockets close, and nothing
// else happens; the other members still count it as a member until
// deregister.
func (f *inProcess) crash(m *inMember) {
	m.end.Do(func() {
		m.pool.Crash()
		fleet.Crash(m.keeper)
		m.c.Shutdown(false)
	})
}

// deregister is the member provider noticing that m is gone.
func (f *inProcess) deregister(m *inMember) {
	f.agent.DeregisterService(m.c.ActorSystem.ID)
}

func (f *inProcess) stop() {
	for _, m := range f.members {
		f.leaving.Go(func() { f.leave(m) }) // in parallel: each takes 2-5 s
	}
	f.leaving.Wait()
	if err := f.upstream.Close(); err != nil {
		f.t.Errorf("upstream: %v", err)
	}
}

// host is the member index where the grain activated last.
func (f *inProcess) host() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.hosts) == 0 {
		return -1
	}
	return f.hosts[len(f.hosts)-1]
}

func (f *inProcess) activations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.hosts)
}

// await waits until cond holds, looking again at every pool change; the
// deadline guards against a hung test and reports what was waited for.
func (f *inProcess) await(what string, within time.Duration, cond func() bool) time.Duration {
	f.t.Helper()
	start := time.Now()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-f.changed:
		case <-deadline.C:
			f.t.Fatalf("not %s within %v:%s", what, within, f.describe())
		}
	}
	return time.Since(start)
}

func (f *inProcess) describe() string {
	out := fmt.Sprintf("\n  counter open %d peak %d; upstream %+v", f.counter.Open(), f.counter.Peak(), f.upstream.Stats())
	for _, m := range f.members {
		out += fmt.Sprintf("\n  member %d: %+v", m.i, m.pool.Stats())
	}
	return out
}

// holding reports whether each listed member's pool holds exactly its count.
func (f *inProcess) holding(want map[*inMember]int) func() bool {
	return func() bool {
		for m, n := range want {
			if s := m.pool.Stats(); s.Held != n || s.Share != n {
				return false
			}
		}
		return true
	}
}

// checkBudget fails the test if the sockets ever exceeded the budget, at the
// nodes' shared counter or at the upstream (allowing for closes it sees late).
func (f *inProcess) checkBudget() {
	f.t.Helper()
	const grace = 250 * time.Millisecond
	if p := f.counter.Peak(); p > f.budget {
		f.t.Errorf("the nodes held %d sockets at once, budget %d", p, f.budget)
	}
	if p := f.upstream.PeakAllowingLateCloses(grace); p > f.budget {
		f.t.Errorf("the upstream saw %d connections at once (closes %v early), budget %d", p, grace, f.budget)
	}
	f.t.Logf("peak: %d at the nodes, %d at the upstream (%d with closes %v early), budget %d",
		f.counter.Peak(), f.upstream.Stats().Peak, f.upstream.PeakAllowingLateCloses(grace), grace, f.budget)
}

// serveMore waits until every running member has served n more requests: the
// load has gone on for a while, measured in work rather than time.
func (f *inProcess) serveMore(n int, members ...*inMember) {
	f.t.Helper()
	base := map[*inMember]int{}
	for _, m := range members {
		base[m] = m.pool.Stats().Served
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, m := range members {
		for m.pool.Stats().Served < base[m]+n {
			if time.Now().After(deadline) {
				f.t.Fatalf("member %d served %d, not %d more:%s", m.i, m.pool.Stats().Served, n, f.describe())
			}
			select {
			case <-f.changed:
			case <-time.After(10 * time.Millisecond): // served counts change without a pool event
			}
		}
	}
}

func TestClusterOfThreeNeverExceedsTheBudgetUnderLoad(t *testing.T) {
	f := startInProcess(t, 12, memberSpec{callers: 10}, memberSpec{callers: 10}, memberSpec{callers: 10})
	a, b, c := f.members[0], f.members[1], f.members[2]
	took := f.await("fair shares", 30*time.Second, f.holding(map[*inMember]int{a: 4, b: 4, c: 4}))
	t.Logf("fair shares (4 each) held %v after the load started", took.Round(time.Millisecond))
	for _, m := range f.members {
		s, err := m.keeper.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if s.Members != 3 || s.Floor != 4 {
			t.Errorf("member %d sees %d members, floor %d; want 3 and 12/3", m.i, s.Members, s.Floor)
		}
	}
	f.serveMore(300, a, b, c)
	if s := f.members[0].pool.Stats(); s.Share != 4 {
		t.Errorf("member 0 share %d after more load, want it to stay 4", s.Share)
	}
	f.checkBudget()
	logRenewals(t, f)
}

func TestClusterSurvivorTakesTheWholeBudgetWhenAMemberLeaves(t *testing.T) {
	f := startInProcess(t, 12, memberSpec{callers: 20}, memberSpec{callers: 20}, memberSpec{})
	a, b := f.members[0], f.members[1]
	f.await("fair shares", 30*time.Second, f.holding(map[*inMember]int{a: 6, b: 6}))
	leaver := b
	if f.host() == 1 {
		leaver, a = a, b // the grain's move is the next test's subject
	}
	start := time.Now()
	f.leaving.Go(func() { f.leave(leaver) }) // takes 2-5 s; its share comes back first
	f.await("the whole budget at the survivor", 10*time.Second, f.holding(map[*inMember]int{a: 12}))
	t.Logf("the survivor held the whole budget %v after the other member began to leave", time.Since(start).Round(time.Millisecond))
	f.serveMore(100, a)
	f.checkBudget()
}

func TestClusterGrainThatMovesNeverGrantsMoreThanTheBudget(t *testing.T) {
	f := startInProcess(t, 12, memberSpec{callers: 10}, memberSpec{callers: 10}, memberSpec{callers: 10})
	f.await("fair shares", 30*time.Second, f.holding(map[*inMember]int{f.members[0]: 4, f.members[1]: 4, f.members[2]: 4}))
	host := f.members[f.host()]
	var survivors []*inMember
	for _, m := range f.members {
		if m != host {
			survivors = append(survivors, m)
		}
	}
	before := f.activations()
	start := time.Now()
	f.crash(host)
	f.deregister(host) // the provider notices at once: the survivors' leases still hold
	took := f.await("the dead member's share shared out", 10*time.Second, f.holding(map[*inMember]int{survivors[0]: 6, survivors[1]: 6}))
	t.Logf("the grain's host died; the survivors held 6 each %v later (lease %v, safe mode included)", took.Round(time.Millisecond), fleet.DefaultLease)
	if f.activations() == before || f.host() == host.i {
		t.Errorf("the grain did not move: activations %v", f.hosts)
	}
	_ = start
	f.serveMore(100, survivors...)
	f.checkBudget()
}

func TestClusterKeepsTheLeaseThenTheFloorWhileTheGrainCannotBeReached(t *testing.T) {
	const floor = 2
	f := startInProcess(t, 12, memberSpec{callers: 10, floor: floor}, memberSpec{callers: 10, floor: floor}, memberSpec{callers: 10, floor: floor})
	f.await("fair shares", 30*time.Second, f.holding(map[*inMember]int{f.members[0]: 4, f.members[1]: 4, f.members[2]: 4}))
	host := f.members[f.host()]
	var survivors []*inMember
	for _, m := range f.members {
		if m != host {
			survivors = append(survivors, m)
		}
	}
	// The host dies and nobody notices: the grain cannot be reached.
	f.crash(host)
	start := time.Now()
	took := f.await("the floor", 15*time.Second, f.holding(map[*inMember]int{survivors[0]: floor, survivors[1]: floor}))
	t.Logf("with the grain unreachable, the survivors kept their lease and fell to the floor %v after the crash", took.Round(time.Millisecond))
	for _, m := range survivors {
		s, err := m.keeper.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Routes) != 1 || !s.Routes[0].OnFloor || s.Routes[0].Failures == 0 {
			t.Errorf("member %d: %+v, want one route on the floor after failed calls", m.i, s)
		}
	}
	// The lease held for most of its length before the floor.
	if took < fleet.DefaultLease/2 {
		t.Errorf("the floor came %v after the crash: the lease should have held longer", took)
	}
	f.deregister(host)
	f.await("the dead member's share shared out", 20*time.Second, f.holding(map[*inMember]int{survivors[0]: 6, survivors[1]: 6}))
	t.Logf("after the provider noticed, the survivors held 6 each %v after the crash", time.Since(start).Round(time.Millisecond))
	f.checkBudget()
}

func logRenewals(t *testing.T, f *inProcess) {
	for _, m := range f.members {
		s, err := m.keeper.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range s.Routes {
			t.Logf("member %d: share %d, %d renewals (last took %v), %d failures, grain sees %d nodes", m.i, r.Share, r.Renewals, r.LastRenewal, r.Failures, r.Nodes)
		}
	}
}

// BenchmarkGrainCall measures one ShareRequest to the budget grain through
// cluster.Request, from the member that hosts the grain and from another.
func BenchmarkGrainCall(b *testing.B) {
	f := startInProcess(b, 1000, memberSpec{}, memberSpec{}, memberSpec{})
	route := "http://10.0.0.1:8080"
	if _, err := fleet.CallGrain(f.members[0].c, route, "bench-warm", 1); err != nil {
		b.Fatal(err)
	}
	host := f.host()
	for _, bc := range []struct {
		name string
		m    *inMember
	}{
		{"local", f.members[host]},
		{"remote", f.members[(host+1)%3]},
	} {
		b.Run(bc.name, func(b *testing.B) {
			node := "bench-" + bc.name
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := fleet.CallGrain(bc.m.c, route, node, uint64(i+1)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
