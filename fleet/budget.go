package fleet

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/fleet/internal/protocol"
)

// Options configures a Budget.
type Options struct {
	// MaxConnsPerRoute is the most connections per route that all the nodes
	// of the cluster together may open. Required, > 0.
	MaxConnsPerRoute int
	// Floor bounds what a node may use of a route while its lease has
	// lapsed and the owner of the route's ledger, cut off from etcd, vouches
	// for it (and keeps counting it; see the package documentation). 0
	// means MaxConnsPerRoute divided by the nodes registered; a
	// negative Floor means 0: the node then opens nothing without a lease.
	// No floor lets the fleet exceed the budget: an owner vouches for no
	// more than its ledger counts for the node.
	Floor int
	// Etcd is the etcd the fleet keeps its registry and the owners of its
	// ledgers in: the source of truth that fences every grant (the
	// cluster's member provider may be another). Required; the budget never
	// closes it. Create it after the cluster's StartMember (an etcd client
	// made earlier races with the gRPC logger remote.Start installs), with
	// a short reconnect back-off (etcdprovider.ClientConfig).
	Etcd *clientv3.Client
	// Prefix is where the fleet's keys live in etcd (default
	// "/connactor/fleet-budgets/<cluster name>/"). Every member of a fleet
	// uses the same; it must not be under the keys of the cluster's member
	// provider (protoactor's etcd provider watches <its root>/<cluster name>
	// and everything that starts with it).
	Prefix string
	// SessionTTL is the TTL of each member's session in etcd (default the
	// lease and 2 s, 5 s; at least 2 s). A member that dies or is cut off
	// from etcd loses its ledgers and its place in the registry that long
	// after its last keepalive: a shorter TTL moves them sooner; a longer
	// one rides out a longer etcd outage before the shares fall to their
	// floors, and gives the members' etcd clients longer to find a
	// restarted etcd before their sessions expire (see the package
	// documentation).
	SessionTTL time.Duration

	// coord replaces etcd in this package's tests.
	coord func() coordinator
}

// Budget is one node's fleet budget: give it to client.Config.Fleet. It
// implements actors.FleetBudget. Its methods are safe for concurrent use.
type Budget struct {
	c   *cluster.Cluster
	opt Options
}

var _ actors.FleetBudget = (*Budget)(nil)

// New returns the budget of one node. The cluster is the embedding service's,
// started (StartMember) with Kind() among its kinds; the client that takes
// the budget lives in the cluster's actor system. New starts nothing: the
// first client to start its keeper makes the member join the fleet.
func New(c *cluster.Cluster, opt Options) (*Budget, error) {
	switch {
	case c == nil || c.ActorSystem == nil:
		return nil, fmt.Errorf("%w: no cluster", ErrInvalidConfig)
	case opt.MaxConnsPerRoute <= 0:
		return nil, fmt.Errorf("%w: MaxConnsPerRoute %d", ErrInvalidConfig, opt.MaxConnsPerRoute)
	case opt.Etcd == nil && opt.coord == nil:
		return nil, fmt.Errorf("%w: no Etcd client (the fleet keeps its registry and the owners of its ledgers there)", ErrInvalidConfig)
	case opt.SessionTTL < 0:
		return nil, fmt.Errorf("%w: negative SessionTTL", ErrInvalidConfig)
	case opt.SessionTTL > 0 && opt.SessionTTL < 2*time.Second:
		return nil, fmt.Errorf("%w: SessionTTL %v below 2s (etcd counts leases in seconds)", ErrInvalidConfig, opt.SessionTTL)
	}
	kc, ok := kindConfig(c)
	if !ok {
		return nil, fmt.Errorf("%w: the cluster lacks the budget host's kind: add fleet.Kind() with cluster.WithKinds on every member", ErrInvalidConfig)
	}
	if c.Remote == nil {
		return nil, fmt.Errorf("%w: the cluster is not started (StartMember)", ErrInvalidConfig)
	}
	if opt.SessionTTL == 0 {
		opt.SessionTTL = kc.Lease + 2*time.Second // the lease is positive: at least 2 s
	}
	if opt.Prefix == "" {
		opt.Prefix = "/connactor/fleet-budgets/" + c.Config.Name + "/"
	}
	return &Budget{c: c, opt: opt}, nil
}

// ActorSystem is the cluster's actor system.
func (b *Budget) ActorSystem() *actor.ActorSystem { return b.c.ActorSystem }

// MaxConnsPerRoute is Options.MaxConnsPerRoute.
func (b *Budget) MaxConnsPerRoute() int { return b.opt.MaxConnsPerRoute }

// StartKeeper starts a keeper for one client (see actors.FleetBudget). The
// first keeper of a member makes it join the fleet: its budget host starts,
// and its session in etcd opens in the background. It does not wait for the
// cluster, except while the member's last keeper is stopping: it then waits
// until the member has left (that keeper's Stop bounds how long) and starts
// a new one.
func (b *Budget) StartKeeper(cfg actors.FleetKeeperConfig) (actors.FleetKeeper, error) {
	if cfg.Supervisor == nil {
		return nil, fmt.Errorf("%w: no supervisor", ErrInvalidConfig)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	newCoord := b.opt.coord
	if newCoord == nil {
		newCoord = func() coordinator {
			return newEtcdCoordinator(b.opt.Etcd, b.opt.Prefix, b.opt.SessionTTL, logger)
		}
	}
	m := joinMember(b.c, newCoord, logger)
	a := &keeperActor{m: m, cfg: cfg, done: make(chan struct{}),
		kc: protocol.KeeperConfig{Budget: b.opt.MaxConnsPerRoute, Floor: b.opt.Floor, Lease: m.kind.Lease}}
	pid := m.sys.Root.SpawnPrefix(withRestarts(func() actor.Actor { return a }), "fleet-keeper")
	h := &keeperHandle{a: a, pid: pid, node: nodeID(pid)}
	m.coord.Register(h.node)
	return h, nil
}
