package fleet

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/connactor/connactor/fleet/internal/protocol"
)

// KindName is the cluster kind of the budget host.
const KindName = "connactor.fleet.host"

// DefaultLease is how long a granted share holds: nodes renew every third of
// it, a dead node's share returns within about one lease, and a shard that
// moves without its ledgers stays in safe mode for one lease.
const DefaultLease = protocol.DefaultLease

// KindConfig tunes the budget host. Every member of a cluster must use the
// same KindConfig: a ledger that moves to a member with a shorter Lease
// would leave safe mode before the leases of its previous owner expired.
type KindConfig struct {
	// Lease is how long a grant holds (default DefaultLease). Below a second
	// it is only good for tests: nodes renew every Lease/3.
	Lease time.Duration
	// OnOwned, when set, is called on the host actor's goroutine when this
	// member comes to own a shard of the routes' ledgers (epoch is the
	// shard's ownership epoch). It must not block. Tests and telemetry use it
	// to see where ledgers live and how often they move.
	OnOwned func(shard int, epoch uint64)
}

// kinds holds the KindConfig of each kind NewKind made, by kind: a member
// finds its own in its cluster's configuration.
var kinds sync.Map // *cluster.Kind -> KindConfig

// Kind returns the budget host's kind with the default configuration. Add it
// to the cluster's kinds on every member:
//
//	cluster.Configure(name, provider, lookup, remoteCfg, cluster.WithKinds(fleet.Kind()))
//
// It marks the member as a host of ledgers in the cluster's topology and
// carries the host's configuration. The cluster never activates it by
// identity: the budget places its ledgers itself, on the hosts registered
// in etcd, and fences their ownership there (see the package
// documentation).
func Kind() *cluster.Kind { return NewKind(KindConfig{}) }

// NewKind returns the budget host's kind with cfg (zero fields take their
// defaults).
func NewKind(cfg KindConfig) *cluster.Kind {
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	k := cluster.NewKind(KindName, actor.PropsFromProducer(func() actor.Actor { return &hostActor{} }))
	kinds.Store(k, cfg)
	return k
}

// kindConfig returns the KindConfig of c's budget host kind, and whether c
// has one.
func kindConfig(c *cluster.Cluster) (KindConfig, bool) {
	if c.Config == nil {
		return KindConfig{}, false
	}
	k := c.Config.Kinds[KindName]
	if k == nil {
		return KindConfig{}, false
	}
	if cfg, ok := kinds.Load(k); ok {
		return cfg.(KindConfig), true
	}
	return KindConfig{Lease: DefaultLease}, true
}

// Shard returns the shard of route (route.Key.String()): the unit the
// ledgers are owned and moved in. With KindConfig.OnOwned it tells where a
// route's ledger lives.
func Shard(route string) int { return protocol.ShardOf(route, protocol.DefaultShards) }
