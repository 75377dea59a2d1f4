package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/connactor/connactor/actors"
)

// Options configures a Budget.
type Options struct {
	// MaxConnsPerRoute is the most connections per route that all the nodes
	// of the cluster together may open. Required, > 0.
	MaxConnsPerRoute int
	// Floor is a route's share while its lease has expired and its ledger
	// cannot be reached. 0 means MaxConnsPerRoute / members. A negative Floor
	// means 0: the node then opens nothing to a route it holds no lease for.
	Floor int
}

// Budget is one node's fleet budget: give it to client.Config.Fleet. It
// implements actors.FleetBudget. Its methods are safe for concurrent use.
type Budget struct {
	c   *cluster.Cluster
	opt Options
}

var _ actors.FleetBudget = (*Budget)(nil)

// New returns the budget of one node. The cluster is the embedding service's,
// started (StartMember) with Kind() among its kinds; the client that takes the
// budget lives in the cluster's actor system. New starts nothing: each client
// starts its keeper when it starts.
func New(c *cluster.Cluster, opt Options) (*Budget, error) {
	switch {
	case c == nil || c.ActorSystem == nil:
		return nil, fmt.Errorf("%w: no cluster", ErrInvalidConfig)
	case opt.MaxConnsPerRoute <= 0:
		return nil, fmt.Errorf("%w: MaxConnsPerRoute %d", ErrInvalidConfig, opt.MaxConnsPerRoute)
	case c.Config == nil || c.Config.Kinds[KindName] == nil:
		return nil, fmt.Errorf("%w: the cluster lacks the budget's kind: add fleet.Kind() with cluster.WithKinds on every member", ErrInvalidConfig)
	case c.Remote == nil:
		return nil, fmt.Errorf("%w: the cluster is not started (StartMember)", ErrInvalidConfig)
	}
	return &Budget{c: c, opt: opt}, nil
}

// ActorSystem is the cluster's actor system.
func (b *Budget) ActorSystem() *actor.ActorSystem { return b.c.ActorSystem }

// MaxConnsPerRoute is Options.MaxConnsPerRoute.
func (b *Budget) MaxConnsPerRoute() int { return b.opt.MaxConnsPerRoute }

// StartKeeper starts a keeper for one client (see actors.FleetBudget).
func (b *Budget) StartKeeper(cfg actors.FleetKeeperConfig) (actors.FleetKeeper, error) {
	kc := keeperConfig{
		Cluster:    b.c,
		Budget:     b.opt.MaxConnsPerRoute,
		Floor:      b.opt.Floor,
		Supervisor: cfg.Supervisor,
		Logger:     cfg.Logger,
	}
	if on := cfg.OnRenewal; on != nil {
		kc.OnRenewal = func(r Renewal) { on(r.Took, r.Err) }
	}
	k, err := startKeeper(kc)
	if err != nil {
		return nil, err
	}
	return keeperHandle{k}, nil
}

// keeperHandle is a Keeper as actors.FleetKeeper.
type keeperHandle struct{ *Keeper }

func (h keeperHandle) Snapshot(ctx context.Context) (actors.FleetSnapshot, error) {
	s, err := h.Keeper.Snapshot(ctx)
	if err != nil {
		return actors.FleetSnapshot{}, err
	}
	out := actors.FleetSnapshot{Members: s.Members, Routes: make([]actors.FleetRoute, len(s.Routes))}
	for i, r := range s.Routes {
		out.Routes[i] = actors.FleetRoute{Route: r.Route, LeaseLeft: max(r.LeaseLeft, time.Duration(0)),
			Safe: r.Safe, OnFloor: r.OnFloor, LastRenewal: r.LastRenewal}
	}
	return out, nil
}
