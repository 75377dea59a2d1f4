package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/fleet/internal/protocol"
	"github.com/connactor/connactor/fleet/internal/protocol/fleetpb"
)

// keeperActor is one client's keeper: protocol.Keeper in an actor. The
// supervisor tells it each route's usage (actors.UsageReported) and asks it
// for the shares (actors.SharesRequest); it renews with the hosts (Renew by
// ctx.Request, answered with RenewReply) and tells the supervisor every
// change of a share (actors.ShareChanged). It runs its timers after every
// message and every tickInterval, and at the keeper's next wake when that
// comes sooner (a renewal held back by MinGap or a host's RetryAfter leaves
// when it may, not at the next tick). All its state is touched only inside
// Receive.
type keeperActor struct {
	m    *member
	cfg  actors.FleetKeeperConfig
	kc   protocol.KeeperConfig
	k    *protocol.Keeper
	self *actor.PID
	stop chan struct{} // ends the ticker
	done chan struct{} // closed when the actor has stopped
	// release: a Stop gives the shares back; closed once the last renewals
	// are answered (or given up).
	release chan struct{}
	// wake sends wakeMsg at its time, the keeper's next wake, when that
	// comes before the next tick (nil: none set).
	wake    *time.Timer
	wakeMsg *keeperWake
}

// Messages to the keeper actor from its handle. keeperSnapshotRequest is
// answered on reply (cap 1), keeperReleaseRequest by closing done.
type (
	keeperTick            struct{}
	keeperWake            struct{ at time.Time } // from the actor's own timer (wake)
	keeperSnapshotRequest struct{ reply chan actors.FleetSnapshot }
	keeperReleaseRequest  struct{ done chan struct{} }
)

var theKeeperTick = &keeperTick{}

func (a *keeperActor) Receive(ctx actor.Context) {
	now := time.Now()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.self = ctx.Self()
		a.kc.Node = nodeID(a.self)
		a.k = protocol.NewKeeper(a.kc, keeperSink{a})
		if reg := a.m.addKeeper(a.self); reg != nil {
			a.k.SetRegistry(reg, now)
		}
		a.stop = make(chan struct{})
		a.m.ticker(a.self, theKeeperTick, a.stop)
		return
	case *actors.UsageReported:
		a.k.Usage(m.Route, m.Held, m.Idle, m.Waiting, now)
	case *actors.SharesRequest:
		a.k.SharesRequest()
	case *fleetpb.RenewReply, *fleetpb.Nudge:
		a.onProtocol(m.(proto.Message), now)
	case *actor.DeadLetterResponse:
		// A renewal reached a member where no host lives (any more).
		if m.Target != nil {
			a.k.Unreachable(protocol.HostID(m.Target.Address), now)
		}
	case *keeperTick:
	case *keeperWake:
		if m == a.wakeMsg { // else from a timer stopped since
			a.wake, a.wakeMsg = nil, nil
		}
	case *registryChanged:
		a.k.SetRegistry(m.reg, now)
	case *sessionLost:
		a.k.SessionLost()
	case *keeperSnapshotRequest:
		m.reply <- a.snapshot(now)
		return
	case *keeperReleaseRequest:
		a.release = m.done
		a.k.Release(now)
	case *actor.Stopping:
		a.endTimers()
		a.m.removeKeeper(a.self)
		return
	case *actor.Stopped:
		if a.release != nil {
			close(a.release)
		}
		close(a.done)
		return
	case *actor.Restarting:
		// A restart sends no Stopping, and Started starts a new ticker:
		// this one ends here (else it would keep the member's leave waiting
		// for its calls).
		a.endTimers()
		return
	default:
		a.m.logger.Warn("fleet: keeper got an unknown message", slog.String("type", fmt.Sprintf("%T", m)))
		return
	}
	a.k.Tick(now)
	a.scheduleWake(ctx, now)
	if a.release != nil && a.k.InFlight() == 0 {
		close(a.release)
		a.release = nil
	}
}

// scheduleWake sets the wake timer for the keeper's next wake if the ticker
// would come later, and no earlier wake is set.
func (a *keeperActor) scheduleWake(ctx actor.Context, now time.Time) {
	at := a.k.NextWake()
	if at.IsZero() || !at.Before(now.Add(tickInterval)) || a.wake != nil && !at.Before(a.wakeMsg.at) {
		return
	}
	a.stopWake()
	sys, self, msg := ctx.ActorSystem(), a.self, &keeperWake{at: at}
	// At least a millisecond: a wake that is due already had its Tick.
	a.wake = time.AfterFunc(max(at.Sub(now), time.Millisecond), func() { sys.Root.Send(self, msg) })
	a.wakeMsg = msg
}

// endTimers ends the ticker this start began and the wake timer, once: the
// actor's state survives a restart, and a Started that failed before it
// made its ticker leaves none.
func (a *keeperActor) endTimers() {
	if a.stop != nil {
		close(a.stop)
		a.stop = nil
	}
	a.stopWake()
}

func (a *keeperActor) stopWake() {
	if a.wake != nil {
		a.wake.Stop()
		a.wake, a.wakeMsg = nil, nil
	}
}

// onProtocol handles a message from a host, as it crossed the cluster.
func (a *keeperActor) onProtocol(pm proto.Message, now time.Time) {
	msg, err := protocol.Decode(pm)
	if err != nil {
		a.m.logger.Warn("fleet: keeper got a malformed message", slog.Any("error", fmt.Errorf("%w: %w", ErrBadMessage, err)))
		return
	}
	switch m := msg.(type) {
	case protocol.RenewReply:
		a.k.HandleReply(m, now)
	case protocol.Nudge:
		a.k.Nudged(m.Host)
	}
}

func (a *keeperActor) snapshot(now time.Time) actors.FleetSnapshot {
	members, routes := a.k.Snapshot(now)
	s := actors.FleetSnapshot{Members: members, Routes: make([]actors.FleetRoute, len(routes))}
	for i, r := range routes {
		s.Routes[i] = actors.FleetRoute{Route: r.Route, LeaseLeft: r.LeaseLeft, Safe: r.Safe, OnFloor: r.OnFloor,
			LastRenewal: r.LastRenewal}
	}
	sort.Slice(s.Routes, func(i, j int) bool { return s.Routes[i].Route < s.Routes[j].Route })
	return s
}

// keeperSink is the keeper's outside world: renewals to the hosts by the
// cluster, shares to the supervisor, outcomes to the client's telemetry.
type keeperSink struct{ a *keeperActor }

func (s keeperSink) Send(to protocol.HostID, r protocol.Renew) {
	a := s.a
	a.m.sys.Root.RequestWithCustomSender(hostPID(to), protocol.Encode(r), a.self)
}

func (s keeperSink) ShareChanged(route string, share, budget int) {
	s.a.m.sys.Root.Send(s.a.cfg.Supervisor, &actors.ShareChanged{Route: route, Share: share, Budget: budget})
}

func (s keeperSink) Renewed(_ protocol.HostID, took time.Duration, err error) {
	if s.a.cfg.OnRenewal == nil {
		return
	}
	if errors.Is(err, protocol.ErrTimeout) {
		err = fmt.Errorf("%w (after %v)", ErrCallTimeout, took)
	}
	s.a.cfg.OnRenewal(took, err)
}

// keeperHandle is a running keeper, as actors.FleetKeeper.
type keeperHandle struct {
	a    *keeperActor
	pid  *actor.PID
	node protocol.NodeID
}

func (h *keeperHandle) PID() *actor.PID { return h.pid }

func (h *keeperHandle) Snapshot(ctx context.Context) (actors.FleetSnapshot, error) {
	reply := make(chan actors.FleetSnapshot, 1)
	h.a.m.sys.Root.Send(h.pid, &keeperSnapshotRequest{reply: reply})
	select {
	case s := <-reply:
		return s, nil
	case <-h.a.done:
		return actors.FleetSnapshot{}, ErrStopped
	case <-ctx.Done():
		return actors.FleetSnapshot{}, ctx.Err()
	}
}

// releaseWait bounds how long Stop waits for the hosts to answer its last
// renewals: the shares go back at once when they do, and with the node's
// leaving the registry (or the leases' ends) when they do not.
const releaseWait = 2 * time.Second

// Stop gives every share back (a last renewal to each host, which wants and
// has nothing), takes the node out of the registry, stops the keeper and, if
// it was its member's last, hands the member's shards to the other members
// and ends its session. It waits at most until ctx ends; what it could not
// finish happens with the TTLs of the leases and of the session.
func (h *keeperHandle) Stop(ctx context.Context) error {
	m := h.a.m
	if m.crashed.Load() {
		m.sys.Root.Stop(h.pid)
		<-h.a.done
		m.leave(ctx)
		return nil
	}
	done := make(chan struct{})
	m.sys.Root.Send(h.pid, &keeperReleaseRequest{done: done})
	wait, cancel := context.WithTimeout(ctx, releaseWait)
	select {
	case <-done:
	case <-h.a.done:
	case <-wait.Done():
	}
	cancel()
	if err := m.coord.Deregister(ctx, h.node); err != nil {
		m.logger.Debug("fleet: the node could not leave the registry; it leaves with the session", slog.Any("error", err))
	}
	m.sys.Root.Poison(h.pid)
	select {
	case <-h.a.done:
	case <-ctx.Done():
	}
	m.leave(ctx)
	return ctx.Err()
}
