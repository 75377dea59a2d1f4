package fleet

import (
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/connactor/connactor/actors"
)

// keeperActor is the Keeper's actor. All its fields are touched only inside
// Receive, but for k's and cfg's read-only parts.
type keeperActor struct {
	k       *Keeper
	cfg     keeperConfig
	p       params
	routes  map[string]*routeShare
	members int
	// topologySeen: a topology event arrived, so the first count (read
	// concurrently at start) is older and ignored.
	topologySeen bool
	releasing    bool
}

// Receive handles the keeper's messages (messages.go; RenewNow from grains).
func (a *keeperActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actors.UsageReported:
		a.onUsage(ctx, m)
	case tick:
		a.onTick(ctx)
	case *callEnded:
		a.onCallEnded(ctx, m)
	case *structpb.Struct:
		a.onStruct(ctx, m)
	case *membersSeen:
		a.onMembersSeen(ctx, m)
	case *actors.SharesRequest:
		a.onSharesRequest(ctx)
	case *snapshotRequest:
		m.reply <- a.snapshot()
	case *releaseRequest:
		a.onRelease(ctx, m)
	case *actor.Stopped:
		close(a.k.done)
	case *actor.Started, *actor.Stopping, *actor.Restarting:
	default:
		a.cfg.Logger.Warn("fleet: keeper got an unknown message", slog.String("type", fmt.Sprintf("%T", m)))
	}
}

func (a *keeperActor) onUsage(ctx actor.Context, m *actors.UsageReported) {
	if a.releasing || m.Route == "" {
		return
	}
	now := a.cfg.now()
	r := a.routes[m.Route]
	if r == nil {
		r = newRouteShare(m.Route, now)
		a.routes[m.Route] = r
	}
	r.usage(now, m.Held, m.Idle, m.Waiting)
	a.step(ctx, r, now)
}

func (a *keeperActor) onTick(ctx actor.Context) {
	now := a.cfg.now()
	for _, r := range a.routes {
		a.step(ctx, r, now)
	}
}

func (a *keeperActor) onCallEnded(ctx actor.Context, m *callEnded) {
	r := a.routes[m.route]
	if r == nil {
		return
	}
	now := a.cfg.now()
	// An abandoned call was reported to OnRenewal when it was abandoned.
	sentAt, latest := r.sentAt, m.seq == r.seq && r.inFlight
	r.ended(now, m.seq, m.resp, m.err)
	if latest && a.cfg.OnRenewal != nil {
		a.cfg.OnRenewal(Renewal{Route: r.route, Took: now.Sub(sentAt), Err: m.err, Grant: m.resp.Grant, Safe: m.resp.Safe > 0})
	}
	if latest && m.err != nil {
		a.cfg.Logger.Debug("fleet: budget grain call failed", slog.String("route", r.route), slog.Any("error", m.err))
	}
	a.step(ctx, r, now)
}

// onSharesRequest tells the supervisor again every share that is not 0.
func (a *keeperActor) onSharesRequest(ctx actor.Context) {
	if a.releasing {
		return
	}
	for _, r := range a.routes {
		if r.told != 0 {
			ctx.Send(a.cfg.Supervisor, &actors.ShareChanged{Route: r.route, Share: r.told, Budget: a.budgetOf(r)})
		}
	}
}

func (a *keeperActor) onStruct(ctx actor.Context, m *structpb.Struct) {
	n, err := decodeRenewNow(m)
	if err != nil {
		a.cfg.Logger.Warn("fleet: keeper got a malformed message", slog.Any("error", err))
		return
	}
	r := a.routes[n.Route]
	if r == nil {
		return
	}
	now := a.cfg.now()
	r.nudge(now)
	a.step(ctx, r, now)
}

func (a *keeperActor) onMembersSeen(ctx actor.Context, m *membersSeen) {
	if m.first && a.topologySeen {
		return
	}
	a.topologySeen = a.topologySeen || !m.first
	if m.n == a.members {
		return
	}
	a.members = m.n
	a.onTick(ctx) // the floor may have changed
}

// floor is the share of a route whose lease expired while its grain could
// not be reached (Config.Floor).
func (a *keeperActor) floor() int {
	switch {
	case a.cfg.Floor > 0:
		return min(a.cfg.Floor, a.cfg.Budget)
	case a.cfg.Floor < 0 || a.members <= 0:
		return 0
	}
	return a.cfg.Budget / a.members
}

// step brings one route up to date at now: gives up on an overdue call, starts
// a call when one is due, tells the supervisor a changed share and forgets
// the route once nothing is left of it.
func (a *keeperActor) step(ctx actor.Context, r *routeShare, now time.Time) {
	if sentAt := r.sentAt; r.abandon(now, &a.p) && a.cfg.OnRenewal != nil {
		a.cfg.OnRenewal(Renewal{Route: r.route, Took: now.Sub(sentAt), Err: fmt.Errorf("%w (after %v)", ErrCallTimeout, a.p.callTimeout)})
	}
	if a.releasing {
		return // the release calls were the last: nothing starts after them
	}
	if r.due(now, &a.p) && !a.k.stopping.Load() { // once Stop has begun only the release calls start
		a.call(ctx, r.begin(now, &a.p, a.node(ctx), a.floor()))
	}
	share, _ := r.share(now, a.floor())
	if share != r.told {
		r.told = share
		ctx.Send(a.cfg.Supervisor, &actors.ShareChanged{Route: r.route, Share: share, Budget: a.budgetOf(r)})
	}
	if r.told == 0 && r.forgettable(now, &a.p) {
		delete(a.routes, r.route)
	}
}

func (a *keeperActor) budgetOf(r *routeShare) int {
	if r.budget > 0 {
		return r.budget
	}
	return a.cfg.Budget
}

func (a *keeperActor) node(ctx actor.Context) nodeID {
	return nodeID{Address: ctx.Self().Address, ID: ctx.Self().Id}
}

// call runs one grain call on a goroutine owned by the Keeper's workers; its
// end comes back as a callEnded message.
func (a *keeperActor) call(ctx actor.Context, req shareRequest) {
	k, g, timeout := a.k, a.cfg.granter, a.p.callTimeout
	self, root := ctx.Self(), ctx.ActorSystem().Root
	msg := req.proto()
	k.workers.Go(func() {
		end := &callEnded{route: req.Route, seq: req.Seq}
		s, err := g.call(req.Route, msg, timeout)
		if err == nil {
			end.resp, err = decodeShareResponse(s)
		}
		end.err = err
		select {
		case <-k.done: // the keeper has stopped: nobody to tell
		default:
			root.Send(self, end)
		}
	})
}

// onRelease gives every share back: each route with something the grain
// counts gets a last call that wants and has nothing (it still reports what
// it holds: the grain counts that until the lease expires). These are the
// keeper's last calls: from here on it starts none (step). It makes none
// when Stop's context ended before it got here, nor a second time.
func (a *keeperActor) onRelease(ctx actor.Context, m *releaseRequest) {
	defer close(m.done)
	if a.releasing {
		return
	}
	a.releasing = true
	if m.ctx.Err() != nil {
		return // Stop gave up on the release: the shares expire with their leases
	}
	now := a.cfg.now()
	for _, r := range a.routes {
		if r.grainCounts() == 0 && r.has(now) == 0 {
			continue
		}
		r.released = true
		r.inFlight = false // an answer to an earlier call no longer matters
		a.call(ctx, r.begin(now, &a.p, a.node(ctx), a.floor()))
	}
}

func (a *keeperActor) snapshot() Snapshot {
	now := a.cfg.now()
	s := Snapshot{Budget: a.cfg.Budget, Members: a.members, Floor: a.floor(), Routes: make([]RouteShare, 0, len(a.routes))}
	for _, r := range a.routes {
		share, onFloor := r.share(now, s.Floor)
		left := time.Duration(0)
		if now.Before(r.leaseUntil) {
			left = r.leaseUntil.Sub(now)
		}
		s.Routes = append(s.Routes, RouteShare{
			Route: r.route, Share: share, OnFloor: onFloor, Budget: a.budgetOf(r),
			Grant: r.grant, LeaseLeft: left, Safe: r.safe, Nodes: r.nodes,
			Held: r.held, Idle: r.idle, Waiting: r.waiting,
			LastRenewal: r.lastTook, Renewals: r.renewed, Failures: r.failures,
		})
	}
	sort.Slice(s.Routes, func(i, j int) bool { return s.Routes[i].Route < s.Routes[j].Route })
	return s
}
