package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Fleet budgets: the supervisor's side of the contract in fleet_msgs.go.
// The node's keeper (SupervisorConfig.Fleet) holds a share of each route's
// fleet-wide budget and tells it here (ShareChanged); the supervisor grants a route a connection permit only
// while the route holds less than its share, and tells the keeper each route's
// demand (UsageReported) when it changes.
//
// Nothing here is on the request path: a request served by an idle connection
// sends the supervisor nothing, so it sends the keeper nothing either. Held
// (permits granted: connections open or dialing) changes only by messages the
// supervisor handles anyway (permits granted, given back, connections
// closed), and a change is reported at once; the idle and waiting counts are
// the routes' published counters, looked at on those messages and every
// FleetInterval, and reported only when the counts changed.
//
// When a share shrinks below what a route holds, the supervisor asks the route
// to close idle connections (EvictIdleRequest, one at a time) and tells it
// RoomWanted, so that the connections its requests free close instead of
// going idle while no waiter of its own needs them. No request in flight is
// cut: a connection serving one closes when it is released.

// DefaultFleetInterval is SupervisorConfig.FleetInterval's default.
const DefaultFleetInterval = 100 * time.Millisecond

// fleetTick is sent by the supervisor's ticker every FleetInterval while a
// fleet budget is on. No reply.
type fleetTick struct{}

// theFleetTick is the one fleetTick sent, never changed.
var theFleetTick = &fleetTick{}

// fleetState is the supervisor's fleet state across its routes.
type fleetState struct {
	// shares are the keeper's last ShareChanged by route name, so that a
	// route actor started again (after a failure, or idle expiry of its
	// entry) starts at the share the keeper knows. Routes at 0 are absent.
	shares map[string]ShareChanged
	byName map[string]*routeEntry
}

func newFleetState() fleetState {
	return fleetState{shares: map[string]ShareChanged{}, byName: map[string]*routeEntry{}}
}

// fleetRoute is a route entry's fleet state.
type fleetRoute struct {
	share    int           // the most the route may hold (fleet on only)
	reported UsageReported // the last usage sent to the keeper
}

func (s *Supervisor) fleetInterval() time.Duration {
	switch {
	case s.cfg.Fleet == nil:
		return 0
	case s.cfg.FleetInterval > 0:
		return s.cfg.FleetInterval
	}
	return DefaultFleetInterval
}

// underShare reports whether e may get one more permit under its fleet share
// (always, without a fleet budget).
func (s *Supervisor) underShare(e *routeEntry) bool {
	return s.cfg.Fleet == nil || e.held < e.share
}

// fleetAllows is underShare for a queued permit.
func (s *Supervisor) fleetAllows(pid *actor.PID) bool {
	return s.underShare(s.byID[pid.Id])
}

// overShare reports whether e holds more than its fleet share.
func (s *Supervisor) overShare(e *routeEntry) bool {
	return s.cfg.Fleet != nil && e.held > e.share
}

// fleetRouteStarted gives a new route entry its name and the share the keeper
// last told for it.
func (s *Supervisor) fleetRouteStarted(ctx actor.Context, e *routeEntry) {
	if s.cfg.Fleet == nil {
		return
	}
	e.name = e.h.Key.String()
	s.fleet.byName[e.name] = e
	if sc, ok := s.fleet.shares[e.name]; ok {
		s.tellShare(ctx, e, sc.Share, sc.Budget)
	}
}

// tellShare sets e's fleet share: the supervisor's record, what Stats and
// the gauge read, and the route's own (FleetShareTold).
func (s *Supervisor) tellShare(ctx actor.Context, e *routeEntry, share, budget int) {
	e.share = share
	e.h.Fleet.Share.Store(int32(share))
	e.h.Fleet.Budget.Store(int32(budget))
	ctx.Send(e.h.PID, &FleetShareTold{Share: share, Budget: budget})
}

// fleetRouteStopped tells the keeper that a route whose actor stopped holds
// nothing any more (its sockets are closed).
func (s *Supervisor) fleetRouteStopped(ctx actor.Context, e *routeEntry) {
	if s.cfg.Fleet == nil {
		return
	}
	if s.fleet.byName[e.name] == e {
		delete(s.fleet.byName, e.name)
	}
	zero := UsageReported{Route: e.name}
	if e.reported.Route != "" && e.reported != zero { // the keeper knows of it
		e.reported = zero
		ctx.Send(s.cfg.Fleet, &zero)
	}
}

// onShareChanged records the keeper's new share of a route and enforces it:
// more permits may follow (grantPermits runs after), or the route must shed
// idle connections.
func (s *Supervisor) onShareChanged(ctx actor.Context, m *ShareChanged) {
	if s.cfg.Fleet == nil {
		return
	}
	share := max(m.Share, 0)
	if share == 0 {
		delete(s.fleet.shares, m.Route)
	} else {
		s.fleet.shares[m.Route] = ShareChanged{Route: m.Route, Share: share, Budget: m.Budget}
	}
	e := s.fleet.byName[m.Route]
	if e == nil {
		return
	}
	s.tellShare(ctx, e, share, m.Budget)
	s.enforceShare(ctx, e)
}

// enforceShare makes a route that holds more than its share shed connections:
// idle ones now (one EvictIdleRequest at a time), busy ones as they are
// released (RoomWanted). Once it is back within its share, RoomWanted is
// taken back (unless room is wanted for the total).
func (s *Supervisor) enforceShare(ctx actor.Context, e *routeEntry) {
	if s.cfg.Fleet == nil {
		return
	}
	s.tellRoom(ctx, e)
	if s.overShare(e) && !e.evicting && e.h.Pub.Idle.Load() > 0 {
		s.askEvict(ctx, e)
	}
}

// onFleetTick reports the routes whose idle or waiting counts changed since
// the last report, and makes routes above their share shed idle connections
// that appeared since.
func (s *Supervisor) onFleetTick(ctx actor.Context) {
	for _, e := range s.list {
		s.report(ctx, e)
		if s.overShare(e) {
			s.enforceShare(ctx, e)
		}
	}
}

// report sends the keeper e's usage if it changed since the last report.
// Held is exact (the permits the route holds); Idle and Waiting are the
// route's published counters, read now. Waiting leaves out the callers that a
// dial in progress will serve, and is at least the route's permits queued
// here.
func (s *Supervisor) report(ctx actor.Context, e *routeEntry) {
	if s.cfg.Fleet == nil {
		return
	}
	idle := min(max(int(e.h.Pub.Idle.Load()), 0), e.held)
	leased := max(int(e.h.Pub.Leased.Load()), 0)
	dialing := max(e.held-idle-leased, 0)
	waiting := max(int(e.h.Pub.Pending.Load())-dialing, e.queued, 0)
	u := UsageReported{Route: e.name, Held: e.held, Idle: idle, Waiting: waiting}
	if u == e.reported {
		return
	}
	e.reported = u
	ctx.Send(s.cfg.Fleet, &u)
}
