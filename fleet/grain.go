package fleet

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/types/known/structpb"
)

// KindName is the cluster kind of the budget grain. Its identities are route
// keys as route.Key.String() spells them ("http://10.0.0.1:8080").
const KindName = "connactor.fleet.budget"

// DefaultLease is how long a granted share holds: nodes renew every third of
// it, a dead node's share returns within about one lease, and a grain that
// moved stays in safe mode for one lease.
const DefaultLease = 3 * time.Second

// KindConfig tunes the budget grain. Every member of a cluster must use the
// same KindConfig: a grain that moves to a member with a shorter Lease would
// leave safe mode before the leases of its previous activation expired.
type KindConfig struct {
	// Lease is how long a grant holds (default DefaultLease). Below a second it
	// is only good for tests: nodes renew every Lease/3 and a grain call on a
	// loaded machine can take longer than that.
	Lease time.Duration
	// OnActivated, when set, is called on the grain's goroutine when a grain
	// activates on this member (the first use of a route, or a move after a
	// member left), before it answers anything. It must not block. Tests and
	// telemetry use it to see where grains live and how often they move.
	OnActivated func(route string)

	now func() time.Time // tests in this package set a fake clock
}

// Kind returns the budget grain's kind with the default configuration. Add it
// to the cluster's kinds on every member:
//
//	cluster.Configure(name, provider, disthash.New(), remoteCfg, cluster.WithKinds(fleet.Kind()))
func Kind() *cluster.Kind { return NewKind(KindConfig{}) }

// NewKind returns the budget grain's kind with cfg (zero fields take their
// defaults).
func NewKind(cfg KindConfig) *cluster.Kind {
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	return cluster.NewKind(KindName, grainProps(cfg))
}

func grainProps(cfg KindConfig) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &grain{cfg: cfg} })
}

// grain is the budget grain: a virtual actor, one per route, that divides the
// route's fleet budget among the nodes that ask (see ledger). Its state lives
// in memory only; a new activation rebuilds it from the nodes' requests,
// starting in safe mode.
type grain struct {
	cfg    KindConfig
	route  string // the grain's identity; empty when spawned outside a cluster (tests)
	ledger *ledger
}

// Receive handles the grain's messages; see wire.go for the protocol.
func (g *grain) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		g.ledger = newLedger(g.cfg.now(), g.cfg.Lease)
	case *cluster.ClusterInit:
		g.onClusterInit(m)
	case *structpb.Struct:
		g.onStruct(ctx, m)
	case *actor.Stopping, *actor.Stopped, *actor.Restarting:
	default:
		ctx.Logger().Warn("fleet: budget grain got an unknown message", slog.Any("message", m))
	}
}

func (g *grain) onClusterInit(m *cluster.ClusterInit) {
	if m.Identity != nil {
		g.route = m.Identity.Identity
	}
	if g.cfg.OnActivated != nil {
		g.cfg.OnActivated(g.route)
	}
}

func (g *grain) onStruct(ctx actor.Context, m *structpb.Struct) {
	if wireType(m) != typeShareRequest {
		ctx.Logger().Warn("fleet: budget grain got an unknown message", slog.String("type", wireType(m)))
		return
	}
	req, err := decodeShareRequest(m)
	if err == nil && g.route != "" && req.Route != g.route {
		err = ErrBadMessage
	}
	if err != nil {
		// No answer: the keeper's call times out and it keeps what it has.
		ctx.Logger().Warn("fleet: budget grain refused a request", slog.String("route", g.route), slog.Any("error", err))
		return
	}
	resp, nudge := g.ledger.apply(g.cfg.now(), req)
	ctx.Respond(resp.proto())
	for _, n := range nudge {
		ctx.Send(actor.NewPID(n.Address, n.ID), renewNow{Route: req.Route}.proto())
	}
}
