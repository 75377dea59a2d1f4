//go:build !race

// The in-process cluster tests: three members of a protoactor cluster in this
// process (the test provider, disthash), each with its own connactor client
// with a fleet budget on one etcd (Debian's etcd-server, started on 127.0.0.1
// for the test), all loading one shared upstream that counts connections
// from its side, and dialing through one shared socket counter. They are
// built without the race detector only: protoactor's cluster has data races
// of its own (RACES.md). Run them with
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
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/fleet"
	"github.com/connactor/connactor/internal/testkit/fleettest"
)

// testLogger is quiet unless FLEET_TEST_LOG is set: a cluster logs a lot.
func testLogger() *slog.Logger {
	if os.Getenv("FLEET_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// inProcess is a cluster of members in this process, each with its own
// connactor client (a fleet budget on the cluster and etcd), all against one
// upstream and one shared socket counter (every client dials through it).
type inProcess struct {
	t        testing.TB
	budget   int
	route    string
	agent    *test.InMemAgent
	etcd     *clientv3.Client
	upstream *fleettest.Upstream
	counter  *fleettest.Counter
	members  []*inMember

	mu      sync.Mutex
	owners  []int // the member index each time a member came to own the route's ledger
	leaving sync.WaitGroup
}

type inMember struct {
	i        int
	c        *cluster.Cluster
	client   *client.Client
	renewals *fleettest.Renewals
	callers  int
	load     *fleettest.Load // nil until loaded, or after unload
	loadMu   sync.Mutex
	end      sync.Once // a member leaves or crashes once
}

type memberSpec struct {
	callers int
}

func startInProcess(t testing.TB, budget int, specs ...memberSpec) *inProcess {
	t.Helper()
	cli := startEtcd(t)
	up, err := fleettest.NewUpstream(2 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	f := &inProcess{t: t, budget: budget, route: up.URL(), agent: test.NewInMemAgent(), etcd: cli, upstream: up,
		counter: &fleettest.Counter{}}
	t.Cleanup(f.stop)
	name := fmt.Sprintf("fleet-test-%d", time.Now().UnixNano())
	// One after another: a member that joins while another starts can be
	// missed by the cluster's provider.
	for i, spec := range specs {
		f.members = append(f.members, f.startMember(i, name, spec))
	}
	for _, m := range f.members {
		f.loadUp(m)
	}
	return f
}

func (f *inProcess) startMember(i int, name string, spec memberSpec) *inMember {
	logger := testLogger()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	kind := fleet.NewKind(fleet.KindConfig{OnOwned: func(shard int, _ uint64) {
		if shard == fleet.Shard(f.route) {
			f.mu.Lock()
			f.owners = append(f.owners, i)
			f.mu.Unlock()
		}
	}})
	cfg := cluster.Configure(name, test.NewTestProvider(f.agent), disthash.New(), remote.Configure("127.0.0.1", 0), cluster.WithKinds(kind))
	c := cluster.New(sys, cfg)
	c.StartMember()
	m := &inMember{i: i, c: c, renewals: fleettest.NewRenewals(), callers: spec.callers}
	budget, err := fleet.New(c, fleet.Options{MaxConnsPerRoute: f.budget, Etcd: f.etcd, Prefix: "/" + name + "/"})
	if err != nil {
		f.t.Fatal(err)
	}
	cl, err := client.New(client.Config{
		Fleet:            budget,
		MaxConnsPerRoute: f.budget, DialContext: f.counter.DialContext,
		MeterProvider: m.renewals.MeterProvider, Logger: logger,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	m.client = cl
	return m
}

// loadUp starts m's callers (none for a member without callers).
func (f *inProcess) loadUp(m *inMember) {
	if m.callers == 0 {
		return
	}
	m.loadMu.Lock()
	defer m.loadMu.Unlock()
	if m.load == nil {
		m.load = fleettest.StartLoad(m.client, f.upstream.URL()+"/", m.callers)
	}
}

// unload stops m's callers; its route goes idle.
func (f *inProcess) unload(m *inMember) {
	m.loadMu.Lock()
	defer m.loadMu.Unlock()
	if m.load != nil {
		m.load.Stop()
	}
}

// leave stops m as a service that shuts down does: its callers end, its
// client shuts down (connections closed, shares given back, the member's
// ledgers handed over), its cluster member leaves.
func (f *inProcess) leave(m *inMember) {
	m.end.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		f.unload(m)
		if err := m.client.Shutdown(ctx); err != nil {
			f.t.Errorf("member %d: client: %v", m.i, err)
		}
		m.c.Shutdown(true)
		m.renewals.MeterProvider.Shutdown(ctx)
	})
}

// crash stops m as a process that dies does, as seen from the rest of the
// fleet: its session is left to expire in etcd, its member stops answering
// at once, then its sockets close.
func (f *inProcess) crash(m *inMember) {
	m.end.Do(func() {
		fleet.Crash(m.c.ActorSystem)
		m.c.Shutdown(false)
		f.unload(m)
		m.client.Close()
		m.renewals.MeterProvider.Shutdown(context.Background())
	})
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

// owner is the member index that came to own the route's ledger last.
func (f *inProcess) owner() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.owners) == 0 {
		return -1
	}
	return f.owners[len(f.owners)-1]
}

func (f *inProcess) ownerships() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.owners)
}

// stats is m's route to the upstream, from its client's Stats.
func (f *inProcess) stats(m *inMember) client.RouteStats {
	return fleettest.RouteOf(m.client.Stats(), f.route)
}

// await waits until cond holds, looking again every 20 ms (shares change
// inside the clients, with no event outside); the deadline guards against a
// hung test and reports what was waited for.
func (f *inProcess) await(what string, within time.Duration, cond func() bool) time.Duration {
	f.t.Helper()
	start := time.Now()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	look := time.NewTicker(20 * time.Millisecond)
	defer look.Stop()
	for !cond() {
		select {
		case <-look.C:
		case <-deadline.C:
			f.t.Fatalf("not %s within %v:%s", what, within, f.describe())
		}
	}
	return time.Since(start)
}

func (f *inProcess) describe() string {
	out := fmt.Sprintf("\n  counter open %d peak %d; upstream %+v", f.counter.Open(), f.counter.Peak(), f.upstream.Stats())
	for _, m := range f.members {
		r := f.stats(m)
		out += fmt.Sprintf("\n  member %d: share %d of %d (%s), open %d, idle %d, pending %d",
			m.i, r.FleetShare, r.FleetBudget, r.FleetState, r.Open, r.Idle, r.Pending)
	}
	return out
}

// holding reports whether each listed member's route holds exactly its count
// of connections, as its share.
func (f *inProcess) holding(want map[*inMember]int) func() bool {
	return func() bool {
		for m, n := range want {
			if r := f.stats(m); r.Open != n || r.FleetShare != n {
				return false
			}
		}
		return true
	}
}

// checkBudget fails the test if the sockets ever exceeded the budget, at the
// clients' shared counter or at the upstream (allowing for closes it sees
// late).
func (f *inProcess) checkBudget() {
	f.t.Helper()
	const grace = 250 * time.Millisecond
	if p := f.counter.Peak(); p > f.budget {
		f.t.Errorf("the clients held %d sockets at once, budget %d", p, f.budget)
	}
	if p := f.upstream.PeakAllowingLateCloses(grace); p > f.budget {
		f.t.Errorf("the upstream saw %d connections at once (closes %v early), budget %d", p, grace, f.budget)
	}
	f.t.Logf("peak: %d at the clients, %d at the upstream (%d with closes %v early), budget %d",
		f.counter.Peak(), f.upstream.Stats().Peak, f.upstream.PeakAllowingLateCloses(grace), grace, f.budget)
}

// serveMore waits until every listed member has served n more requests: the
// load has gone on for a while, measured in work rather than time.
func (f *inProcess) serveMore(n int, members ...*inMember) {
	f.t.Helper()
	served := func(m *inMember) int {
		m.loadMu.Lock()
		defer m.loadMu.Unlock()
		return m.load.Served()
	}
	base := map[*inMember]int{}
	for _, m := range members {
		base[m] = served(m)
	}
	for _, m := range members {
		f.await(fmt.Sprintf("member %d served %d more", m.i, n), 60*time.Second, func() bool { return served(m) >= base[m]+n })
	}
}

func (f *inProcess) others(than *inMember) []*inMember {
	var out []*inMember
	for _, m := range f.members {
		if m != than {
			out = append(out, m)
		}
	}
	return out
}

func TestClusterOfThreeNeverExceedsTheBudgetUnderLoad(t *testing.T) {
	f := startInProcess(t, 12, memberSpec{callers: 10}, memberSpec{callers: 10}, memberSpec{callers: 10})
	a, b, c := f.members[0], f.members[1], f.members[2]
	took := f.await("fair shares", 30*time.Second, f.holding(map[*inMember]int{a: 4, b: 4, c: 4}))
	t.Logf("fair shares (4 each) held %v after the load started", took.Round(time.Millisecond))
	// Holding the shares says nothing of responses: wait for each member's
	// first before reading when it came.
	for _, m := range f.members {
		m.loadMu.Lock()
		l := m.load
		m.loadMu.Unlock()
		f.await(fmt.Sprintf("member %d's first response", m.i), 30*time.Second, func() bool { return l.Served() > 0 })
		t.Logf("member %d: the new route's first response %v after its load started", m.i, l.FirstServed().Round(time.Microsecond))
	}
	// The shares come from the hosts' ledgers; each keeper counts the nodes
	// of its own view of the registry, which can lag behind them.
	for _, m := range f.members {
		f.await(fmt.Sprintf("member %d counting 3 nodes", m.i), 30*time.Second, func() bool { return m.client.Stats().FleetMembers == 3 })
	}
	f.serveMore(300, a, b, c)
	for _, m := range f.members {
		if r := f.stats(m); r.FleetShare != 4 || r.FleetBudget != 12 || r.FleetState != client.FleetLease || r.Open > 4 {
			t.Errorf("member %d after more load: share %d of %d (%s), %d open; want 4 of 12 on a lease",
				m.i, r.FleetShare, r.FleetBudget, r.FleetState, r.Open)
		}
	}
	f.checkBudget()
	logRenewals(t, f)
}

// A member whose callers stop gives its share back at its next renewal; a
// member that shuts down gives its share back and hands its ledgers over
// at once. The last busy member alone reaches the whole budget.
func TestClusterSurvivorTakesTheWholeBudgetWhenAMemberLeaves(t *testing.T) {
	f := startInProcess(t, 12, memberSpec{callers: 20}, memberSpec{callers: 20}, memberSpec{callers: 20})
	f.await("fair shares", 30*time.Second, f.holding(map[*inMember]int{f.members[0]: 4, f.members[1]: 4, f.members[2]: 4}))
	stay := f.members[0]
	idler, leaver := f.members[1], f.members[2]
	f.unload(idler) // its route goes idle: it gives its share back
	took := f.await("the idle member's share shared out", 30*time.Second, f.holding(map[*inMember]int{stay: 6, leaver: 6, idler: 0}))
	t.Logf("the idle member's share was shared out %v after its callers stopped", took.Round(time.Millisecond))
	f.leaving.Go(func() { f.leave(leaver) })
	took = f.await("the whole budget at the survivor", 10*time.Second, f.holding(map[*inMember]int{stay: 12}))
	t.Logf("the survivor held the whole budget %v after the other member began to shut down", took.Round(time.Millisecond))
	f.serveMore(100, stay)
	f.checkBudget()
	logRenewals(t, f)
}

// The member that owns the route's ledger dies. The others keep their
// leases until they run out, then hold nothing: a floor is used only while
// a live owner vouches for it (counts it), and a dead one counts nothing.
// When etcd drops the dead member's session (its TTL), another member takes
// the ledger over, in safe mode for a lease, and the survivors share the
// whole budget again. The budget holds throughout.
func TestClusterLedgerOfADeadMemberMovesAndTheBudgetHolds(t *testing.T) {
	f := startInProcess(t, 12, memberSpec{callers: 10}, memberSpec{callers: 10}, memberSpec{callers: 10})
	f.await("fair shares", 30*time.Second, f.holding(map[*inMember]int{f.members[0]: 4, f.members[1]: 4, f.members[2]: 4}))
	host := f.members[f.owner()]
	survivors := f.others(host)
	before := f.ownerships()
	f.crash(host)
	start := time.Now()
	f.await("the leases run out", 15*time.Second, func() bool {
		for _, m := range survivors {
			if r := f.stats(m); r.FleetShare != 0 {
				return false
			}
		}
		return true
	})
	t.Logf("the survivors kept their leases, then held nothing from %v after the crash", time.Since(start).Round(time.Millisecond))
	f.await("the dead member's share shared out", 30*time.Second, f.holding(map[*inMember]int{survivors[0]: 6, survivors[1]: 6}))
	t.Logf("the survivors held 6 each %v after the crash (session TTL, then safe mode)", time.Since(start).Round(time.Millisecond))
	if f.ownerships() == before || f.owner() == host.i {
		t.Errorf("the ledger did not move: owners %v", f.owners)
	}
	f.serveMore(100, survivors...)
	f.checkBudget()
}

func logRenewals(t *testing.T, f *inProcess) {
	for _, m := range f.members {
		r := f.stats(m)
		rs := m.renewals.Read()
		t.Logf("member %d: share %d (%s); renewals: %d answered (mean %v, p50 <= %v, p99 <= %v, max %v, last %v), %d failed",
			m.i, r.FleetShare, r.FleetState, rs.Answered, rs.Mean.Round(time.Microsecond), rs.P50, rs.P99,
			rs.Max.Round(time.Microsecond), r.FleetRenewal.Round(time.Microsecond), rs.Failed)
	}
}
