package protocol

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fleet is a few keepers and hosts wired together with no delay and no loss,
// on a clock the test moves: the protocol's own logic, without the actors or
// the simulation. Ownership is granted at once (an etcd that always answers).
type fleet struct {
	t      *testing.T
	now    time.Time
	reg    *Registry
	hosts  map[HostID]*Host
	nodes  map[NodeID]*Keeper
	order  []NodeID
	shares map[NodeID]map[string]int // the supervisor's view: the last ShareChanged
	epochs map[int]uint64
	owners map[int]HostID
	queue  []func() // messages in flight, delivered in order by deliver
	sent   map[NodeID]int
	cut    map[HostID]bool // a host cut off: nothing reaches it, nothing leaves it
	// The nodes' pools: demand per node and route, and the connections
	// held, which follow the shares (follow).
	demand map[NodeID]map[string]int
	held   map[NodeID]map[string]int
}

type hostSink struct {
	f  *fleet
	id HostID
}

func (s hostSink) Nudge(to NodeID, n Nudge) {
	if s.f.cut[s.id] {
		return
	}
	s.f.queue = append(s.f.queue, func() {
		// The keeper actor runs its timers after every message it handles.
		s.f.nodes[to].Nudged(n.Host)
		s.f.nodes[to].Tick(s.f.now)
	})
}

func (s hostSink) Acquire(shard int) {
	f := s.f
	f.queue = append(f.queue, func() {
		if o, ok := f.owners[shard]; ok && o != s.id {
			f.hosts[s.id].AcquireFailed(shard, o, f.now)
			return
		}
		f.epochs[shard]++
		f.owners[shard] = s.id
		f.hosts[s.id].Acquired(shard, f.epochs[shard], f.epochs[shard] > 1, f.now)
	})
}

func (s hostSink) Transfer(shards []int, epochs []uint64, to HostInfo) {
	f := s.f
	f.queue = append(f.queue, func() {
		var next []uint64
		for i, sh := range shards {
			f.epochs[sh] = epochs[i] + 1
			f.owners[sh] = to.ID
			next = append(next, epochs[i]+1)
		}
		f.hosts[s.id].Transferred(shards, epochs, next, to, f.now)
	})
}

func (s hostSink) SendHandoff(to HostID, h Handoff) {
	s.f.queue = append(s.f.queue, func() { s.f.hosts[to].ReceiveHandoff(h, s.f.now) })
}

func (s hostSink) SendHandoffAck(to HostID, a HandoffAck) {
	s.f.queue = append(s.f.queue, func() { s.f.hosts[to].ReceiveHandoffAck(a) })
}

type keeperSink struct {
	f  *fleet
	id NodeID
}

func (s keeperSink) Send(to HostID, r Renew) {
	f := s.f
	f.sent[s.id]++
	if f.cut[to] {
		return // lost: the keeper gives up at its CallTimeout
	}
	f.queue = append(f.queue, func() {
		rep := f.hosts[to].HandleRenew(r, f.now)
		f.queue = append(f.queue, func() {
			f.nodes[s.id].HandleReply(rep, f.now)
			f.nodes[s.id].Tick(f.now)
		})
	})
}

func (s keeperSink) ShareChanged(route string, share, budget int) { s.f.shares[s.id][route] = share }
func (s keeperSink) Renewed(HostID, time.Duration, error)         {}

func newFleet(t *testing.T, hosts, nodes, budget int) *fleet {
	f := &fleet{t: t, now: t0, hosts: map[HostID]*Host{}, nodes: map[NodeID]*Keeper{}, shares: map[NodeID]map[string]int{},
		epochs: map[int]uint64{}, owners: map[int]HostID{}, sent: map[NodeID]int{}, cut: map[HostID]bool{},
		demand: map[NodeID]map[string]int{}, held: map[NodeID]map[string]int{}}
	var his []HostInfo
	for i := range hosts {
		id := HostID(fmt.Sprintf("h%d", i))
		f.hosts[id] = NewHost(HostConfig{ID: id}, hostSink{f, id})
		f.hosts[id].Confirmed(int64(i+1), t0.Add(time.Hour))
		his = append(his, HostInfo{ID: id, Lease: int64(i + 1)})
	}
	var ns []NodeID
	for i := range nodes {
		id := NodeID(fmt.Sprintf("n%d", i))
		f.nodes[id] = NewKeeper(KeeperConfig{Node: id, Budget: budget}, keeperSink{f, id})
		f.shares[id] = map[string]int{}
		f.demand[id], f.held[id] = map[string]int{}, map[string]int{}
		f.order = append(f.order, id)
		ns = append(ns, id)
	}
	f.reg = NewRegistry(1, his, ns)
	for _, h := range f.hosts {
		h.SetRegistry(f.reg, t0)
	}
	for _, k := range f.nodes {
		k.SetRegistry(f.reg, t0)
	}
	return f
}

// deliver hands over every message in flight, and those they cause.
func (f *fleet) deliver() {
	for i := 0; len(f.queue) > 0; i++ {
		if i == 100000 {
			for _, n := range f.order {
				f.t.Log(n, f.nodes[n].DebugRoutes())
			}
			f.t.Fatalf("at %v the messages never end", f.now.Sub(t0))
		}
		m := f.queue[0]
		f.queue = f.queue[1:]
		m()
	}
}

// step moves the clock by d, ticking every keeper and host every 50ms and
// delivering what they send.
func (f *fleet) step(d time.Duration) {
	end := f.now.Add(d)
	for f.now.Before(end) {
		f.now = f.now.Add(50 * time.Millisecond)
		for _, id := range f.order {
			f.nodes[id].Tick(f.now)
		}
		for i := range len(f.hosts) {
			f.hosts[HostID(fmt.Sprintf("h%d", i))].Tick(f.now)
		}
		f.deliver()
	}
}

// use sets a node's pool on route: held connections and callers waiting.
func (f *fleet) use(n NodeID, route string, held, waiting int) {
	f.nodes[n].Usage(route, held, 0, waiting, f.now)
}

// want sets a node's demand on route: callers that each keep a connection
// busy. Its pool follows the share (run).
func (f *fleet) want(n NodeID, route string, demand int) {
	f.demand[n][route] = demand
	f.use(n, route, f.held[n][route], max(0, demand-f.held[n][route]))
}

// run steps the clock by d in ticks; after each, every pool opens up to
// min(share, demand) and closes what is above its share at once (its
// requests are short), reporting changes; check runs after each tick.
func (f *fleet) run(d time.Duration, check func()) {
	end := f.now.Add(d)
	for f.now.Before(end) {
		f.step(50 * time.Millisecond)
		for _, n := range f.order {
			routes := make([]string, 0, len(f.demand[n]))
			for route := range f.demand[n] {
				routes = append(routes, route)
			}
			slices.Sort(routes)
			for _, route := range routes {
				demand := f.demand[n][route]
				h := min(f.shares[n][route], demand)
				if h != f.held[n][route] {
					f.held[n][route] = h
					f.nodes[n].Usage(route, h, 0, max(0, demand-h), f.now)
				}
			}
		}
		if check != nil {
			check()
		}
	}
}

// total is the connections the nodes hold on route.
func (f *fleet) total(route string) int {
	sum := 0
	for _, n := range f.order {
		sum += f.held[n][route]
	}
	return sum
}

// within fails the test if the nodes ever hold more than budget on route.
func (f *fleet) within(route string, budget int) func() {
	return func() {
		f.t.Helper()
		if sum := f.total(route); sum > budget {
			f.t.Fatalf("at %v the nodes hold %d connections to %s, budget %d", f.now.Sub(t0), sum, route, budget)
		}
	}
}

// DebugRoutes describes the routes' state, for failure reports.
func (k *Keeper) DebugRoutes() []string {
	var out []string
	for _, r := range k.order.items {
		out = append(out, fmt.Sprintf("%s host %s owner %s grant %d lease %v known %v vouched %d until %v fresh %v sent %d/%d/%d", r.name, r.host, r.owner, r.grant, r.leaseUntil, r.known, r.vouched, r.vouchUntil, r.fresh, r.sentHas, r.sentHeld, r.sentWant))
	}
	return out
}

// expectEach reports every node that does not hold want connections to route
// (when says at which point of the test).
func (f *fleet) expectEach(route string, want int, when string) {
	f.t.Helper()
	for _, n := range f.order {
		if got := f.held[n][route]; got != want {
			f.t.Errorf("%s holds %d %s, want %d", n, got, when, want)
		}
	}
}
