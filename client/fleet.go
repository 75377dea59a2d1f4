package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/connactor/connactor/fleet"
)

// FleetKind is the cluster kind of the budget grain, the virtual actor that
// divides one route's fleet-wide budget (Config.FleetMaxConnsPerRoute) among
// the nodes. Add it to the cluster's kinds on every member, with disthash as
// the identity lookup:
//
//	cluster.Configure(name, provider, disthash.New(), remoteCfg, cluster.WithKinds(client.FleetKind()))
func FleetKind() *cluster.Kind { return fleet.Kind() }

// Fleet budget states of RouteStats.FleetState.
const (
	FleetNone  = "none"  // no share held: not asked for yet, being asked for, or given back
	FleetLease = "lease" // the share is a lease from the route's budget grain
	FleetSafe  = "safe"  // a lease from a grain in safe mode (new, or moved after its host left): no more than held
	FleetFloor = "floor" // the lease expired and the grain cannot be reached: the share is the floor
)

// fleetStopTimeout bounds how long Close waits for the keeper to give its
// shares back (a grain call normally takes milliseconds; one to a member that
// just died can take about 5 s).
const fleetStopTimeout = 10 * time.Second

// fleetOn reports whether cfg asks for a fleet budget.
func (cfg *Config) fleetOn() bool { return cfg.Cluster != nil && cfg.FleetMaxConnsPerRoute > 0 }

// fleetDefaults checks the fleet fields and takes the actor system from the
// cluster.
func (cfg *Config) fleetDefaults() error {
	if cfg.Cluster == nil {
		if cfg.FleetMaxConnsPerRoute > 0 {
			return fmt.Errorf("FleetMaxConnsPerRoute (%d) needs a Cluster", cfg.FleetMaxConnsPerRoute)
		}
		return nil
	}
	switch {
	case cfg.Cluster.ActorSystem == nil:
		return errors.New("Cluster has no actor system")
	case cfg.System == nil:
		cfg.System = cfg.Cluster.ActorSystem
	case cfg.System != cfg.Cluster.ActorSystem:
		return errors.New("System is not the Cluster's actor system (leave it nil to use the cluster's)")
	}
	if cfg.FleetMaxConnsPerRoute == 0 {
		return nil
	}
	if cfg.Cluster.Config == nil || cfg.Cluster.Config.Kinds[fleet.KindName] == nil {
		return errors.New("Cluster lacks the budget grain's kind: add client.FleetKind() with cluster.WithKinds on every member")
	}
	if cfg.Cluster.Remote == nil {
		return errors.New("Cluster is not started (StartMember)")
	}
	return nil
}

// startFleet starts the node's fleet keeper, telling it the supervisor's PID
// (the supervisor is spawned next), and returns the keeper's PID for the
// supervisor (actors.PoolConfig.StartFleet).
func (c *Client) startFleet(_ *actor.ActorSystem, sup *actor.PID) (*actor.PID, error) {
	k, err := fleet.New(fleet.Config{
		Cluster:    c.cfg.Cluster,
		Budget:     c.cfg.FleetMaxConnsPerRoute,
		Floor:      c.cfg.FleetFloor,
		Supervisor: sup,
		Logger:     c.cfg.Logger,
		OnRenewal:  func(r fleet.Renewal) { c.tel.FleetRenewal(r.Took, r.Err) },
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
		c.cfg.Logger.Warn("connactor: the fleet keeper did not stop in time; its last grain calls end by themselves", "err", err)
	}
}

// fleetStats adds the keeper's view to the routes' fleet fields: the state of
// each route's lease and the duration of its last answered grain call.
func (c *Client) fleetStats(st *Stats) {
	if c.keeper == nil {
		return
	}
	snap, err := c.keeper.Snapshot(c.pool.Life())
	if err != nil {
		return // closing
	}
	st.FleetMembers = snap.Members
	byRoute := make(map[string]fleet.RouteShare, len(snap.Routes))
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
			r.FleetBudget = c.cfg.FleetMaxConnsPerRoute
		}
	}
}

func fleetState(r fleet.RouteShare) string {
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
