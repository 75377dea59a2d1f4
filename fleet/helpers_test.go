package fleet

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/fleet/internal/protocol"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// memCoord is an etcd in memory for one process: sessions that never expire
// (a test ends one with crash), the registry, and shards taken and moved by
// compare-and-swap, as etcdCoordinator does in etcd.
type memCoord struct {
	mu       sync.Mutex
	rev      int64
	nextID   int64
	sessions map[int64]*memSession
	owners   map[int]owner
	tombs    map[int]time.Time // shards of a closed session: owned until then
	epochs   map[int]uint64
	down     bool // every call fails, and no confirmation comes
}

type memSession struct {
	c       *memCoord
	lease   int64
	host    protocol.HostID
	events  coordEvents
	nodes   map[protocol.NodeID]bool
	leaving bool
}

func newMemCoord() *memCoord {
	return &memCoord{sessions: map[int64]*memSession{}, owners: map[int]owner{}, tombs: map[int]time.Time{},
		epochs: map[int]uint64{}}
}

// member returns a coordinator for one member.
func (c *memCoord) member() coordinator { return &memSession{c: c, nodes: map[protocol.NodeID]bool{}} }

// publish tells every session the registry (c.mu held).
func (c *memCoord) publish() {
	c.rev++
	var hosts []protocol.HostInfo
	var nodes []protocol.NodeID
	var events []coordEvents
	for _, s := range c.sessions {
		hosts = append(hosts, protocol.HostInfo{ID: s.host, Lease: s.lease, Leaving: s.leaving})
		for n := range s.nodes {
			nodes = append(nodes, n)
		}
		events = append(events, s.events)
	}
	reg := protocol.NewRegistry(c.rev, hosts, nodes)
	for _, e := range events {
		e.Registry(reg)
	}
}

var errDown = context.DeadlineExceeded

func (s *memSession) Open(host protocol.HostID, events coordEvents) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	s.lease, s.host, s.events = c.nextID, host, events
	c.sessions[s.lease] = s
	events.Confirmed(s.lease, time.Now().Add(time.Hour))
	c.publish()
}

func (s *memSession) Register(n protocol.NodeID) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.nodes[n] = true
	s.c.publish()
}

func (s *memSession) Deregister(_ context.Context, n protocol.NodeID) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	delete(s.nodes, n)
	s.c.publish()
	return nil
}

func (s *memSession) Acquire(_ context.Context, shard int) (acquired, error) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return acquired{}, errDown
	}
	if until, ok := c.tombs[shard]; ok && !time.Now().Before(until) {
		delete(c.tombs, shard)
		delete(c.owners, shard)
	}
	if o, ok := c.owners[shard]; ok {
		if o.Lease == s.lease {
			return acquired{ok: true, epoch: o.Epoch, prev: true, from: o.From, session: s.lease}, nil
		}
		return acquired{owner: o.Host, epoch: o.Epoch}, nil
	}
	c.epochs[shard]++
	c.owners[shard] = owner{Host: s.host, Lease: s.lease, Epoch: c.epochs[shard]}
	return acquired{ok: true, epoch: c.epochs[shard], prev: c.epochs[shard] > 1, session: s.lease}, nil
}

func (s *memSession) Transfer(_ context.Context, shards []int, epochs []uint64, to protocol.HostInfo) (transferred, error) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return transferred{}, errDown
	}
	for i, sh := range shards {
		if o := c.owners[sh]; o.Lease != s.lease || o.Epoch != epochs[i] {
			return transferred{lost: true}, nil
		}
	}
	if c.sessions[to.Lease] == nil {
		return transferred{}, nil
	}
	next := make([]uint64, len(shards))
	for i, sh := range shards {
		next[i] = epochs[i] + 1
		c.epochs[sh] = next[i]
		c.owners[sh] = owner{Host: to.ID, Lease: to.Lease, Epoch: next[i], From: s.host}
	}
	return transferred{ok: true, epochs: next}, nil
}

func (s *memSession) Leave(context.Context) error {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.leaving = true
	s.c.publish()
	return nil
}

func (s *memSession) Close(_ context.Context, hold time.Duration) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sessions, s.lease)
	for sh, o := range c.owners {
		if o.Lease == s.lease {
			o.Lease = -1 // nobody's session
			c.owners[sh] = o
			c.tombs[sh] = time.Now().Add(hold)
		}
	}
	c.publish()
	return nil
}

// unstartedCluster is a cluster configured with the budget host's kind but
// not started: an actor system, local sends only. Enough for one member.
func unstartedCluster(t *testing.T, kind *cluster.Kind) *cluster.Cluster {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	cfg := cluster.Configure("fleet-unit-test", test.NewTestProvider(test.NewInMemAgent()), disthash.New(),
		remote.Configure("127.0.0.1", 0), cluster.WithKinds(kind))
	return cluster.New(sys, cfg)
}

// supervisorLog is a fake supervisor: it records the ShareChanged it gets.
type supervisorLog struct {
	pid *actor.PID
	ch  chan actors.ShareChanged
}

func newSupervisorLog(sys *actor.ActorSystem) *supervisorLog {
	s := &supervisorLog{ch: make(chan actors.ShareChanged, 1000)}
	s.pid = sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*actors.ShareChanged); ok {
			s.ch <- *m
		}
	}))
	return s
}

// awaitShare waits for a ShareChanged of route with a share of at least
// want, and returns it; the deadline guards against a hung test.
func (s *supervisorLog) awaitShare(t *testing.T, route string, want int) int {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case m := <-s.ch:
			if m.Route == route && m.Share >= want {
				return m.Share
			}
		case <-deadline:
			t.Fatalf("no share of %d for %s", want, route)
			return 0
		}
	}
}

// outliveDeadLetterThrottle lets a synctest bubble's clock run past
// protoactor's dead-letter throttle: the first dead letter starts a
// goroutine that waits for the throttle's interval (a second), and a bubble
// must end with none left, and the clock stands still once the test's
// function has returned.
func outliveDeadLetterThrottle() {
	time.Sleep(actor.NewConfig().DeadLetterThrottleInterval + time.Second)
}
