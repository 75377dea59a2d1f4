package actors

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A fleet budget is a connection budget per route shared by the nodes of a
// cluster: package fleet implements it (fleet.Budget), and the supervisor
// speaks to it through the interface and the messages below, so that a
// program without a fleet budget links no part of protoactor's cluster.

// FleetBudget is a fleet-wide budget per route, as the front door
// (client.Config.Fleet) and the supervisor see it. *fleet.Budget implements
// it. Its methods are safe for concurrent use.
type FleetBudget interface {
	// ActorSystem is the actor system the budget's actors live in (the
	// cluster's): the client's supervisor must live in it too, since the
	// keeper and the supervisor exchange messages by local Send.
	ActorSystem() *actor.ActorSystem
	// MaxConnsPerRoute is the budget: the most connections per route that
	// all the nodes together may hold.
	MaxConnsPerRoute() int
	// StartKeeper starts this node's keeper, which holds the node's shares
	// and tells cfg.Supervisor each change (ShareChanged). It does not wait
	// for the cluster, with one exception: while the node's last keeper is
	// being stopped, a new one waits until that Stop has returned (bounded by
	// its context), so that the node leaves the fleet before it joins again.
	// One budget may start several keepers (one per client); each is stopped
	// with its own Stop.
	StartKeeper(cfg FleetKeeperConfig) (FleetKeeper, error)
}

// FleetKeeperConfig is what the front door tells a FleetBudget's keeper.
type FleetKeeperConfig struct {
	// Supervisor receives a ShareChanged whenever a route's share changes.
	// Its PID is known before it is spawned: the keeper starts first.
	Supervisor *actor.PID
	// Logger receives the keeper's logs.
	Logger *slog.Logger
	// OnRenewal, when set, is called after every exchange with the cluster
	// that renews shares (answered, failed or abandoned), with how long it
	// took: the connactor.fleet.renewal.duration histogram. It must not
	// block.
	OnRenewal func(took time.Duration, err error)
}

// FleetKeeper is a running keeper (FleetBudget.StartKeeper).
type FleetKeeper interface {
	// PID is the keeper actor: the supervisor sends it UsageReported and
	// SharesRequest.
	PID() *actor.PID
	// Snapshot returns the keeper's view of its shares, taken by message. It
	// blocks until the keeper answers or ctx ends, and fails once the keeper
	// stopped.
	Snapshot(ctx context.Context) (FleetSnapshot, error)
	// Stop gives every share back and stops the keeper, waiting at most
	// until ctx ends. Call it after the supervisor stopped (its routes'
	// sockets are closed and reported).
	Stop(ctx context.Context) error
}

// FleetSnapshot is a keeper's view at one moment.
type FleetSnapshot struct {
	Members int // fleet members this node counts (0 until known)
	Routes  []FleetRoute
}

// FleetRoute is one route in a FleetSnapshot: where its share comes from.
type FleetRoute struct {
	Route       string
	LeaseLeft   time.Duration // until the share's lease expires (0: none)
	Safe        bool          // the lease came from a ledger in safe mode (it moved without its state)
	OnFloor     bool          // the lease expired and the ledger cannot be reached: the share is the floor
	LastRenewal time.Duration // how long the last answered renewal took
}

// UsageReported is sent by the supervisor to the keeper
// (SupervisorConfig.Fleet) whenever the demand on a route changes. No reply.
// The keeper asks for shares in the background; the request path never waits
// for it.
//
// Held counts what the fleet budget limits: connections open plus dials in
// flight. Idle is the part of Held that sits idle in the pool: it counts
// against the budget but not as demand, so a node whose connections idle gives
// its share back. Waiting counts callers queued for a connection of the route.
type UsageReported struct {
	Route   string // route.Key.String(): the budget's route
	Held    int
	Idle    int
	Waiting int
}

// ShareChanged is sent by the keeper to the supervisor whenever this node's
// share of a route changes (it starts at 0 for every route). No reply. From
// then on the supervisor lets the route hold at most Share connections (dials
// included); when Share shrinks it closes idle connections above it and opens
// none until it is back under, and it never cuts a request in flight. Budget
// is the fleet-wide budget the share is part of.
type ShareChanged struct {
	Route  string
	Share  int
	Budget int
}

// SharesRequest is sent by the supervisor to the keeper when it starts, and
// again after it restarted (a restarted supervisor has lost the shares it was
// told). The keeper answers by sending a ShareChanged for every route whose
// share is not 0, as if each had just changed; routes at 0 need no message,
// since every route starts there.
type SharesRequest struct{}
