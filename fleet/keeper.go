package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/eventstream"
	"google.golang.org/protobuf/types/known/structpb"
)

// Config configures a Keeper. Zero values take the documented defaults.
type keeperConfig struct {
	// Cluster is the embedding service's cluster, started as a member with
	// Kind() among its kinds and disthash as its identity lookup. Required.
	Cluster *cluster.Cluster
	// Budget is the most connections per route the whole fleet may hold
	// (Options.MaxConnsPerRoute). Required, > 0.
	Budget int
	// Supervisor receives an actors.ShareChanged whenever a route's share changes.
	// Required; it must live in Cluster's actor system.
	Supervisor *actor.PID
	// Floor is a route's share when its lease has expired and its grain cannot
	// be reached. 0 means Budget / members (the members this node sees; 0 until
	// it knows). A negative Floor means 0: the node then opens nothing to a route
	// it cannot get a lease for, which keeps the budget under any partition at
	// the cost of availability. With a floor above 0 the fleet can exceed the
	// budget while it is split: the unreachable nodes use their floors while
	// the others share the whole budget.
	Floor int
	// Block is the step in which a node asks for more: it asks for its demand
	// rounded up to whole blocks, plus a block of headroom. 0 means
	// max(1, Budget/16).
	Block int
	// CallTimeout bounds each grain call (default 1s). A call that takes
	// longer is abandoned: the lease already held stays valid until it
	// expires, and the next call starts after a back-off. The abandoned call's
	// goroutine ends when the cluster answers, which after a member's death can
	// take about 5 s (disthash asks the dead owner with a fixed timeout).
	CallTimeout time.Duration
	// IdleRelease is how long a route with no connection in use and nobody
	// waiting keeps one block before it gives its whole share back (default
	// DefaultLease).
	IdleRelease time.Duration
	// OnRenewal, when set, is called on the keeper's goroutine after every
	// grain call (answered, failed or abandoned), for telemetry (a histogram
	// of Took). It must not block.
	OnRenewal func(Renewal)
	// Logger receives the keeper's logs (nil = slog.Default()).
	Logger *slog.Logger

	// Tests in this package replace the cluster's actor system, the grain
	// calls, the clock and the ticker.
	system   *actor.ActorSystem
	granter  granter
	now      func() time.Time
	noTicker bool
}

// tickInterval is how often the keeper looks at its routes' timers: lease
// expiry, renewals, back-offs. Events (usage, answers, nudges) are handled at
// once.
const tickInterval = 50 * time.Millisecond

// Keeper is a node's share keeper: an actor that holds this node's shares of
// the fleet budgets, asks the routes' budget grains for them in the background
// and tells the supervisor each share. See the package documentation for the
// messages. Its methods are safe for concurrent use.
type Keeper struct {
	pid      *actor.PID
	sys      *actor.ActorSystem
	sub      *eventstream.Subscription
	stopTick chan struct{}
	done     chan struct{} // closed when the actor has stopped
	// stopping is set by Stop as it begins: Snapshot no longer asks the
	// actor, and the actor starts no renewal (step), only the release calls.
	stopping atomic.Bool
	stopOnce sync.Once
	// workers owns every goroutine the keeper starts: the ticker and the
	// grain calls. The actor adds to it only inside Receive, so once done is
	// closed nothing adds to it and Stop waits for it.
	workers sync.WaitGroup
}

// granter makes grain calls. It may block for longer than timeout.
type granter interface {
	call(route string, req *structpb.Struct, timeout time.Duration) (*structpb.Struct, error)
}

type clusterGranter struct{ c *cluster.Cluster }

func (g clusterGranter) call(route string, req *structpb.Struct, timeout time.Duration) (*structpb.Struct, error) {
	res, err := g.c.Request(route, KindName, req, cluster.WithTimeout(timeout), cluster.WithRetryCount(2))
	if err != nil {
		return nil, err
	}
	s, ok := res.(*structpb.Struct)
	if !ok {
		return nil, fmt.Errorf("%w: an answer of type %T", ErrBadMessage, res)
	}
	return s, nil
}

// New validates cfg, fills its defaults and starts a keeper in the cluster's
// actor system. It does not block on the cluster: the keeper asks for shares
// when the first actors.UsageReported arrives.
func startKeeper(cfg keeperConfig) (*Keeper, error) {
	switch {
	case cfg.Cluster == nil && cfg.system == nil:
		return nil, fmt.Errorf("%w: no Cluster", ErrInvalidConfig)
	case cfg.Budget <= 0:
		return nil, fmt.Errorf("%w: Budget %d", ErrInvalidConfig, cfg.Budget)
	case cfg.Supervisor == nil:
		return nil, fmt.Errorf("%w: no Supervisor", ErrInvalidConfig)
	case cfg.CallTimeout < 0 || cfg.IdleRelease < 0 || cfg.Block < 0:
		return nil, fmt.Errorf("%w: negative CallTimeout, IdleRelease or Block", ErrInvalidConfig)
	}
	if cfg.Block == 0 {
		cfg.Block = max(1, cfg.Budget/16)
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = time.Second
	}
	if cfg.IdleRelease == 0 {
		cfg.IdleRelease = DefaultLease
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.granter == nil {
		cfg.granter = clusterGranter{cfg.Cluster}
	}
	if cfg.system == nil {
		cfg.system = cfg.Cluster.ActorSystem
	}
	return spawnKeeper(cfg), nil
}

// start spawns the keeper in cfg.system.
func spawnKeeper(cfg keeperConfig) *Keeper {
	sys := cfg.system
	k := &Keeper{sys: sys, stopTick: make(chan struct{}), done: make(chan struct{})}
	a := &keeperActor{
		k:      k,
		cfg:    cfg,
		routes: map[string]*routeShare{},
		p: params{
			budget:      cfg.Budget,
			block:       cfg.Block,
			callTimeout: cfg.CallTimeout,
			idleRelease: cfg.IdleRelease,
			minGap:      10 * time.Millisecond,
			maxInFlight: 4,
		},
	}
	// The producer returns the same instance: if Receive ever panics, the
	// restarted keeper keeps its routes, and with them what the supervisor
	// was told.
	k.pid = sys.Root.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor { return a }), "fleet-keeper")
	if cfg.Cluster != nil {
		k.sub = sys.EventStream.Subscribe(func(evt any) {
			if t, ok := evt.(*cluster.ClusterTopology); ok {
				sys.Root.Send(k.pid, &membersSeen{n: withKind(t.Members)})
			}
		})
		sys.Root.Send(k.pid, &membersSeen{n: memberCount(cfg.Cluster), first: true})
	}
	if !cfg.noTicker {
		k.workers.Go(func() {
			t := time.NewTicker(tickInterval)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					sys.Root.Send(k.pid, tick{})
				case <-k.stopTick:
					return
				}
			}
		})
	}
	return k
}

// memberCount counts the members that run the budget grain's kind, as this
// member sees them now. MemberList.GetActivatorMember reads under the member
// list's lock and goes round-robin over those members, so calls in a row name
// each once before the first comes back. Reading MemberList.Members, or the
// topology in Gossiper.GetState's answer, would race with topology updates
// (RACES.md). It does not block.
func memberCount(c *cluster.Cluster) int {
	first := c.MemberList.GetActivatorMember(KindName, "")
	if first == "" {
		return 0
	}
	seen := map[string]bool{first: true}
	for range 1 << 12 {
		a := c.MemberList.GetActivatorMember(KindName, "")
		if a == "" || a == first {
			break
		}
		seen[a] = true
	}
	return len(seen)
}

// withKind counts the members that run the budget grain's kind.
func withKind(members []*cluster.Member) int {
	n := 0
	for _, m := range members {
		if slices.Contains(m.Kinds, KindName) {
			n++
		}
	}
	return n
}

// PID is the keeper actor's PID: the supervisor sends actors.UsageReported to it.
func (k *Keeper) PID() *actor.PID { return k.pid }

// Snapshot returns the keeper's state, taken by message so that it is
// consistent. It blocks until the keeper answers or ctx ends, and returns
// ErrStopped once the keeper has stopped.
func (k *Keeper) Snapshot(ctx context.Context) (Snapshot, error) {
	if k.stopping.Load() {
		return Snapshot{}, ErrStopped
	}
	reply := make(chan Snapshot, 1)
	k.sys.Root.Send(k.pid, &snapshotRequest{reply: reply})
	select {
	case s := <-reply:
		return s, nil
	case <-k.done:
		return Snapshot{}, ErrStopped
	case <-ctx.Done():
		return Snapshot{}, ctx.Err()
	}
}

// Stop gives every share back (a last call to each grain, so that the budget
// returns at once rather than when the leases expire), stops the keeper and
// waits for its goroutines. Call it after the node's connections are closed:
// the shares it gives back are free for other nodes at once. The supervisor
// gets no actors.ShareChanged after Stop has begun, and the keeper starts no grain
// call but the release calls. It blocks until everything has ended or ctx
// ends. When ctx ends before the keeper got to the release, the release is
// skipped and the shares expire with their leases, as after a crash; when
// ctx ended, Stop returns ctx.Err() while the calls in flight end by
// themselves (within CallTimeout plus about 5 s). Later calls wait the same
// way.
func (k *Keeper) Stop(ctx context.Context) error {
	k.stopOnce.Do(func() {
		k.stopping.Store(true)
		if k.sub != nil {
			k.sys.EventStream.Unsubscribe(k.sub)
		}
		close(k.stopTick)
		released := make(chan struct{})
		k.sys.Root.Send(k.pid, &releaseRequest{done: released, ctx: ctx})
		select {
		case <-released:
		case <-k.done:
		case <-ctx.Done():
		}
		k.sys.Root.Poison(k.pid)
	})
	ended := make(chan struct{})
	go func() { // owned by Stop: it ends when the workers have, whoever waits
		<-k.done // from here on nothing adds to the workers
		k.workers.Wait()
		close(ended)
	}()
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
