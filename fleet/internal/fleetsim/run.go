package fleetsim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"time"

	"github.com/connactor/connactor/fleet/internal/protocol"
)

// Config is one simulation run.
type Config struct {
	Seed    uint64
	Members int // N
	Routes  int // R
	Budget  int // connections per route across the fleet
	Callers int // per member; each calls one route, drawn from a Zipf law
	Zipf    float64
	Lease   time.Duration
	TTL     time.Duration // etcd session TTL
	Shards  int

	MinDelay, MaxDelay time.Duration
	Loss               float64
	// EtcdReconnect bounds how long after an etcd outage a member's client
	// reaches etcd again (drawn uniformly; default 1 s, the reconnect
	// back-off of etcdprovider.ClientConfig; gRPC's own grows towards two
	// minutes during an outage).
	EtcdReconnect time.Duration

	Duration time.Duration
	// Shift is how often the routes' popularity changes (the Zipf ranks are
	// dealt again and every caller draws again).
	Shift time.Duration
	// Faults in the timeline (see Timeline); a zero time leaves one out.
	RestartAt, PartitionAt, CrashAt, EtcdDownAt time.Duration
}

// Defaults fills a Config's zero fields.
func (c Config) Defaults() Config {
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	if c.Budget == 0 {
		// Enough for the routes most members call to need rotation at a
		// thousand members (the budget smaller than the members that want
		// it), not so small that a few members exhaust it.
		c.Budget = max(64, 3*c.Members/10)
	}
	if c.Callers == 0 {
		c.Callers = 20
	}
	if c.Zipf == 0 {
		c.Zipf = 1.1
	}
	if c.Shards == 0 {
		c.Shards = protocol.DefaultShards
	}
	def(&c.Lease, protocol.DefaultLease)
	def(&c.TTL, 5*time.Second)
	def(&c.MinDelay, time.Millisecond)
	def(&c.MaxDelay, 50*time.Millisecond)
	def(&c.EtcdReconnect, time.Second)
	def(&c.Duration, 300*time.Second)
	def(&c.Shift, time.Minute)
	return c
}

// Timeline sets the default faults for a run of c.Duration: 1% of messages
// lost throughout; a rolling restart of a tenth of the members, a partition
// of a tenth for 30 s, a host crash, and etcd down for 15 s, each in its own
// minute after a demand shift.
func (c Config) Timeline() Config {
	c = c.Defaults()
	c.Loss = 0.01
	c.RestartAt = c.Shift + 15*time.Second
	c.PartitionAt = 2*c.Shift + 15*time.Second
	c.CrashAt = 3*c.Shift + 15*time.Second
	c.EtcdDownAt = 4*c.Shift + 15*time.Second
	return c
}

// Sim is one run.
type Sim struct {
	cfg     Config
	c       *clock
	net     network
	etcd    *etcd
	members []*member
	hosts   map[protocol.HostID]endpoint
	nodes   map[protocol.NodeID]endpoint

	routes     []string
	routeIndex map[string]int
	held       []int // connections held per route, every member
	zipf       []float64
	perm       []int

	cpu         time.Duration // hosts' CPU time for the sampled renewals
	cpuRequests uint64        // the entries of the sampled renewals
	requests    uint64
	m           metrics
	starting    bool // the first members start: their registrations make one revision
	// onOver, when set, is called at every moment a route is over its
	// budget (tests dump the state with it).
	onOver func(route int)
}

type endpoint struct {
	m   *member
	gen int
}

func (e endpoint) live() bool { return e.m != nil && e.m.live(e.gen) }

// New sets a run up.
func New(cfg Config) *Sim {
	cfg = cfg.Defaults()
	c := &clock{now: t0, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	s := &Sim{cfg: cfg, c: c, net: network{c: c, minDelay: cfg.MinDelay, maxDelay: cfg.MaxDelay, loss: cfg.Loss},
		hosts: map[protocol.HostID]endpoint{}, nodes: map[protocol.NodeID]endpoint{}, routeIndex: map[string]int{}}
	s.etcd = newEtcd(s, cfg.TTL)
	for i := range cfg.Routes {
		r := fmt.Sprintf("http://10.%d.%d.%d:8080", i>>16&255, i>>8&255, i&255)
		s.routes = append(s.routes, r)
		s.routeIndex[r] = i
	}
	s.held = make([]int, cfg.Routes)
	s.zipf = make([]float64, cfg.Routes)
	sum := 0.0
	for k := range cfg.Routes {
		sum += 1 / math.Pow(float64(k+1), cfg.Zipf)
		s.zipf[k] = sum
	}
	for k := range s.zipf {
		s.zipf[k] /= sum
	}
	s.perm = make([]int, cfg.Routes)
	for i := range s.perm {
		s.perm[i] = i
	}
	s.m.init(s)
	return s
}

// send delivers fn at to after the network's delay, unless the message is
// lost, crosses a partition, or to's incarnation has ended by then.
func (s *Sim) send(from *member, to endpoint, fn func()) {
	if to.m == nil || s.net.lost() || from.partitioned != to.m.partitioned {
		return
	}
	s.m.messages++
	s.c.after(s.net.delay(), func() {
		if to.live() && from.partitioned == to.m.partitioned {
			fn()
		}
	})
}

// etcdTimeout is how long a member waits for etcd before it takes a call as
// failed (its outcome unknown).
const etcdTimeout = time.Second

// toEtcdResult runs op at etcd after a delay and gives its result back
// after another; done(nil, false) when no answer came within etcdTimeout
// (etcd unreachable, or the request or its answer lost: the outcome is
// unknown).
func (s *Sim) toEtcdResult(m *member, op func() any, done func(any, bool)) {
	answered := false
	gen := m.gen
	s.c.after(etcdTimeout, func() {
		if !answered {
			answered = true
			if m.live(gen) || m.leaving {
				done(nil, false)
			}
		}
	})
	if m.partitioned || s.etcd.down || s.c.now.Before(m.etcdFrom) || s.net.lost() {
		return
	}
	s.c.after(s.net.delay(), func() {
		if s.etcd.down || m.partitioned {
			return
		}
		res := op()
		if s.net.lost() {
			return
		}
		s.c.after(s.net.delay(), func() {
			if !answered && !m.partitioned {
				answered = true
				done(res, true)
			}
		})
	})
}

func (s *Sim) opened(route int) {
	s.held[route]++
	if over := s.held[route] - s.cfg.Budget; over > 0 {
		s.m.overcommit(route, over)
		if s.onOver != nil {
			s.onOver(route)
		}
	}
}

func (s *Sim) closed(route int) { s.held[route]-- }

// draw deals every member's callers to routes again, by the Zipf law over
// the current ranks.
func (s *Sim) draw() {
	used := 0
	for _, m := range s.members {
		demand := map[int]int{}
		for range s.cfg.Callers {
			rank := sort.SearchFloat64s(s.zipf, s.c.rng.Float64())
			demand[s.perm[min(rank, len(s.perm)-1)]]++
		}
		used += len(demand)
		for _, p := range m.order {
			if _, ok := demand[p.route]; !ok {
				p.setDemand(0)
			}
		}
		keys := make([]int, 0, len(demand))
		for r := range demand {
			keys = append(keys, r)
		}
		sort.Ints(keys)
		for _, r := range keys {
			p := m.pools[r]
			if p == nil {
				p = &pool{m: m, route: r}
				m.pools[r] = p
				m.order = append(m.order, p)
			}
			if m.alive && !m.leaving {
				p.setDemand(demand[r])
			} else {
				p.demand = demand[r]
			}
		}
	}
	s.m.routesUsed += float64(used) / float64(len(s.members))
	s.m.draws++
	s.m.demandChanged()
}

// shift deals the routes' popularity ranks again, and the callers.
func (s *Sim) shift() {
	s.c.rng.Shuffle(len(s.perm), func(i, j int) { s.perm[i], s.perm[j] = s.perm[j], s.perm[i] })
	s.draw()
}

func (s *Sim) register(m *member) {
	s.hosts[m.hostID()] = endpoint{m, m.gen}
	s.nodes[m.nodeID()] = endpoint{m, m.gen}
}

func (s *Sim) startMember(m *member) {
	m.start()
	s.register(m)
	now := s.c.now
	for _, p := range m.order {
		if p.demand > 0 {
			m.keeper.Usage(s.routes[p.route], 0, 0, p.demand, now)
		}
	}
	s.m.eligibilityChanged()
}

// cpuSampleEvery: one renewal in so many is timed (by entries handled).
const cpuSampleEvery = 7

// Run runs the simulation to its end and returns its figures. It keeps its
// goroutine on one thread, whose CPU time it reads.
func (s *Sim) Run() Result {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cfg := s.cfg
	for i := range cfg.Members {
		m := &member{s: s, i: i, pools: map[int]*pool{}}
		s.members = append(s.members, m)
	}
	s.starting = true
	for _, m := range s.members {
		s.startMember(m)
	}
	s.starting = false
	s.etcd.publish()
	// Demand starts once every member has joined and the registry has
	// reached everyone.
	s.c.after(2*time.Second, func() {
		s.m.change("start")
		s.shift()
	})
	for t := cfg.Shift; t < cfg.Duration; t += cfg.Shift {
		s.c.at(t0.Add(t), func() {
			s.m.change("demand shift")
			s.shift()
		})
	}
	if cfg.RestartAt > 0 {
		s.c.at(t0.Add(cfg.RestartAt), s.rollingRestart)
	}
	if cfg.PartitionAt > 0 {
		s.c.at(t0.Add(cfg.PartitionAt), s.partition)
	}
	if cfg.CrashAt > 0 {
		s.c.at(t0.Add(cfg.CrashAt), s.crashHost)
	}
	if cfg.EtcdDownAt > 0 {
		s.c.at(t0.Add(cfg.EtcdDownAt), func() {
			s.m.change("etcd down")
			s.etcd.setDown(true)
			s.c.after(15*time.Second, func() {
				s.m.change("etcd back")
				s.etcd.setDown(false)
			})
		})
	}
	s.m.startSampling()
	s.c.run(t0.Add(cfg.Duration), func() {})
	return s.m.result()
}

// rollingRestart restarts a tenth of the members, spread over 30 s: each
// shuts down gracefully, stays down 5 s, and starts again as a new process.
func (s *Sim) rollingRestart() {
	n := max(1, len(s.members)/10)
	s.m.change("rolling restart")
	order := s.c.rng.Perm(len(s.members))[:n]
	for k, i := range order {
		m := s.members[i]
		s.c.after(time.Duration(k)*30*time.Second/time.Duration(n), func() {
			m.leave()
			s.m.eligibilityChanged()
			s.c.after(5*time.Second, func() {
				if !m.alive {
					s.startMember(m)
				}
			})
		})
	}
	s.c.after(35*time.Second, func() { s.m.change("restarts over") })
}

// partition cuts a tenth of the members off from etcd and the rest for 30 s.
func (s *Sim) partition() {
	n := max(1, len(s.members)/10)
	s.m.change("partition")
	cut := s.c.rng.Perm(len(s.members))[:n]
	for _, i := range cut {
		s.members[i].partitioned = true
	}
	s.m.eligibilityChanged()
	s.c.after(30*time.Second, func() {
		s.m.change("partition healed")
		for _, i := range cut {
			m := s.members[i]
			m.partitioned = false
			m.watch(s.etcd.reg)
		}
		s.m.eligibilityChanged()
	})
}

// crashHost kills the member that owns the most shards, and starts it again
// as a new process 30 s later.
func (s *Sim) crashHost() {
	var victim *member
	for _, m := range s.members {
		if m.alive && !m.partitioned && (victim == nil || m.host.Owned() > victim.host.Owned()) {
			victim = m
		}
	}
	if victim == nil {
		return
	}
	s.m.change("host crash")
	victim.crash()
	s.m.eligibilityChanged()
	s.c.after(30*time.Second, func() {
		s.m.change("host back")
		s.startMember(victim)
	})
}
