package client

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/actors"
)

// Fleet budget states of RouteStats.FleetState.
const (
	FleetNone  = "none"  // no share held: not asked for yet, being asked for, or given back
	FleetLease = "lease" // the share is a lease from the route's ledger in the fleet
	FleetSafe  = "safe"  // a lease from a ledger in safe mode (taken over from a member that died): no more than the route holds
	FleetFloor = "floor" // the lease expired while its ledger's owner cannot reach etcd: the share is the floor it vouches for
)

// fleetStopTimeout bounds how long Close waits for the keeper to give its
// shares back (an exchange with the cluster normally takes milliseconds; one
// with a member that just died can take seconds).
const fleetStopTimeout = 10 * time.Second

// fleetDefaults checks Config.Fleet and takes the actor system from it.
func (cfg *Config) fleetDefaults() error {
	if cfg.Fleet == nil {
		return nil
	}
	sys := cfg.Fleet.ActorSystem()
	switch {
	case sys == nil:
		return errors.New("Fleet has no actor system")
	case cfg.System == nil:
		cfg.System = sys
	case cfg.System != sys:
		return errors.New("System is not the Fleet's actor system (leave it nil to use the fleet's)")
	}
	return nil
}

// fleetBudget is the fleet budget per route (0 without one).
func (cfg *Config) fleetBudget() int {
	if cfg.Fleet == nil {
		return 0
	}
	return cfg.Fleet.MaxConnsPerRoute()
}

// startFleet starts the node's fleet keeper, telling it the supervisor's PID
// (the supervisor is spawned next), and returns the keeper's PID for the
// supervisor (actors.PoolConfig.StartFleet).
func (c *Client) startFleet(_ *actor.ActorSystem, sup *actor.PID) (*actor.PID, error) {
	k, err := c.cfg.Fleet.StartKeeper(actors.FleetKeeperConfig{
		Supervisor: sup,
		Logger:     c.cfg.Logger,
		OnRenewal:  c.tel.FleetRenewal,
	})
	if err != nil {
		return nil, err
	}
	c.keeper = k
	return k.PID(), nil
}

// stopFleet gives the node's shares back and stops the keeper. It runs after
// the supervisor has stopped: every route actor had stopped (its sockets
// closed) and the supervisor had reported it holding nothing.
func (c *Client) stopFleet(ctx context.Context) {
	if c.keeper == nil {
		return
	}
	if err := c.keeper.Stop(ctx); err != nil {
		c.cfg.Logger.Warn("connactor: the fleet keeper did not stop in time; its last exchanges end by themselves", "err", err)
	}
}

// fleetStats adds the keeper's view to the routes' fleet fields: the state of
// each route's lease and the duration of its last answered renewal.
func (c *Client) fleetStats(st *Stats) {
	if c.keeper == nil {
		return
	}
	snap, err := c.keeper.Snapshot(c.pool.Life())
	if err != nil {
		return // closing
	}
	st.FleetMembers = snap.Members
	byRoute := make(map[string]actors.FleetRoute, len(snap.Routes))
	for _, r := range snap.Routes {
		byRoute[r.Route] = r
	}
	for i := range st.Routes {
		r := &st.Routes[i]
		r.FleetState = FleetNone
		if rs, ok := byRoute[r.Route]; ok {
			r.FleetState = fleetState(rs)
			r.FleetRenewal = rs.LastRenewal
		}
		if r.FleetBudget == 0 {
			r.FleetBudget = c.cfg.fleetBudget()
		}
	}
}

func fleetState(r actors.FleetRoute) string {
	switch {
	case r.OnFloor:
		return FleetFloor
	case r.LeaseLeft <= 0:
		return FleetNone
	case r.Safe:
		return FleetSafe
	}
	return FleetLease
}
