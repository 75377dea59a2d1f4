package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
	"github.com/connactor/connactor/telemetry"
)

// ErrRouteClosed answers leases on a route that is shutting down with its client.
var ErrRouteClosed = errors.New("actors: route closed")

// RouteConfig is shared, read-only, by every route actor of a client.
type RouteConfig struct {
	MaxConnsPerRoute int
	MaxIdleTime      time.Duration
	MaxLifetime      time.Duration
	Conn             *conn.Options
	Life             context.Context // ends when the client closes; bounds dials
	Logger           *slog.Logger
	Now              func() time.Time // the clock (tests may fake it)
	// Sup is the supervisor's published state; routes read PermitWaiters to give
	// up a freed connection when another route waits for room.
	Sup *SupervisorPublished
	// Tel receives connection and lease telemetry (nil = none).
	Tel *telemetry.Telemetry
}

// RoutePublished holds counters a route actor publishes for readers outside it
// (the supervisor's LRU choice, gauges, the front door). Only the route writes them.
type RoutePublished struct {
	Idle         atomic.Int32
	Leased       atomic.Int32
	Open         atomic.Int32
	Pending      atomic.Int32
	LRUIdleSince atomic.Int64 // unix nanos of the oldest idle connection; 0 = none
	Stopped      atomic.Bool
}

type connPhase uint8

const (
	phaseDialing connPhase = iota
	phaseIdle
	phaseLeased
)

// connState is the route's record of one connection actor.
type connState struct {
	id        uint64
	pid       *actor.PID
	abort     func()
	phase     connPhase
	created   time.Time
	idleSince time.Time
	idleUntil time.Time // server's Keep-Alive cap; zero = none
	leasedAt  time.Time // when the current lease was granted (Stats: oldest unreleased lease)
	served    int
	idleIdx   int        // position in route.idle while idle
	dial      DialTiming // reported with the first lease only
	release   *Release   // the Release message of every lease of this connection (see Lease)
}

// Route is a route actor: it owns the connections of one route, their idle list
// (least recently used first) and the FIFO of waiting callers, and enforces
// MaxConnsPerRoute. It never blocks: dials and I/O happen in connection actors.
type Route struct {
	key  route.Key
	name string
	cfg  *RouteConfig
	sup  *actor.PID
	pub  *RoutePublished

	self *actor.PID

	conns   map[uint64]*connState
	byPID   map[string]*connState
	idle    []*connState // LRU first, MRU last
	waiters WaitQueue[waiter]

	dialing, permitsPending int
	nextID                  uint64
	closed                  bool
	freshWaiters            int

	opened, closedN, leases, reuses uint64
	closedBy                        map[string]uint64

	tel          *telemetry.Route
	recentCloses ring[ClosedConn]
	recentWaits  ring[Wait]
}

// waiter is a queued LeaseRequest with when and where it queued.
type waiter struct {
	req *LeaseRequest
	queuedAt
}

type queuedAt struct {
	at  time.Time
	pos int
}

// NewRoute returns the producer of the route actor for k, reporting to sup.
func NewRoute(k route.Key, cfg *RouteConfig, sup *actor.PID, pub *RoutePublished) actor.Producer {
	return func() actor.Actor {
		return &Route{key: k, name: k.String(), cfg: cfg, sup: sup, pub: pub,
			conns: map[uint64]*connState{}, byPID: map[string]*connState{},
			closedBy: map[string]uint64{},
			tel:      cfg.Tel.Route(k.Scheme, k.Host, k.Port)}
	}
}

// Receive handles the route actor's messages.
func (r *Route) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *LeaseRequest:
		r.onLease(ctx, m)
	case *LeaseCancel:
		r.onLeaseCancel(m)
	case *Release:
		r.onRelease(ctx, m)
	case *PermitGranted:
		r.onPermitGranted(ctx)
	case *conn.Dialed:
		r.onDialed(ctx, m)
	case *conn.IdleBroken:
		r.onIdleBroken(ctx, m)
	case *EvictIdleRequest:
		r.onEvictIdle(ctx)
	case *ExpireIdle:
		r.onExpire(ctx, m.Now)
	case *RouteStatsRequest:
		m.Reply <- r.stats()
	case *actor.Started:
		r.self = ctx.Self()
	case *actor.Stopping:
		r.onStopping(ctx)
	case *actor.Terminated:
		r.onTerminated(ctx, m)
	case *actor.Stopped, *actor.Restarting:
	default:
		r.cfg.Logger.Warn("route: unknown message", "route", r.name, "type", fmt.Sprintf("%T", m))
	}
}

func (r *Route) onLease(ctx actor.Context, m *LeaseRequest) {
	if r.closed {
		m.Reply <- LeaseResponse{Err: ErrRouteClosed}
		return
	}
	if !m.Fresh && r.waiters.Len() == r.freshWaiters {
		if cs := r.popIdle(ctx); cs != nil {
			r.grant(m, cs, queuedAt{})
			r.publish()
			return
		}
	}
	r.waiters.Push(m.ID, waiter{req: m, queuedAt: queuedAt{at: r.cfg.Now(), pos: r.waiters.Len() + 1}})
	if m.Fresh {
		r.freshWaiters++
	}
	r.wantConns(ctx)
	r.publish()
}

func (r *Route) onLeaseCancel(m *LeaseCancel) {
	w, ok := r.waiters.Remove(m.ID)
	if !ok {
		return // already granted: the caller releases the lease
	}
	r.dequeued(w)
	w.req.Reply <- LeaseResponse{Err: m.Err}
	r.publish()
}

// dequeued accounts for a waiter that left the queue and returns when and where
// it had queued.
func (r *Route) dequeued(w waiter) queuedAt {
	if w.req.Fresh {
		r.freshWaiters--
	}
	return w.queuedAt
}

func (r *Route) onRelease(ctx actor.Context, m *Release) {
	cs := r.conns[m.ConnID]
	if cs == nil || cs.phase != phaseLeased {
		return // closed meanwhile (eviction, client close)
	}
	cs.served++
	now := r.cfg.Now()
	switch {
	case !m.Reusable:
		r.closeConn(ctx, cs, ReasonNotReusable)
	case r.closed:
		r.closeConn(ctx, cs, ReasonClientClosed)
	case r.cfg.MaxLifetime > 0 && now.Sub(cs.created) >= r.cfg.MaxLifetime:
		r.closeConn(ctx, cs, ReasonLifetime)
	default:
		cs.idleUntil = time.Time{}
		if m.Idle > 0 {
			cs.idleUntil = now.Add(m.Idle)
		}
		r.available(ctx, cs, now)
	}
	r.wantConns(ctx)
	r.publish()
}

// available hands a connection that just became free (released or dialed) to the
// oldest waiter that can take it, or makes it idle. When other routes are waiting
// for room under MaxConnsTotal and no waiter here needs it, the connection is
// closed at once: it would be the least recently used idle connection anyway.
func (r *Route) available(ctx actor.Context, cs *connState, now time.Time) {
	fresh := cs.served == 0
	if _, chosen, ok := r.waiters.TakeFirst(func(w waiter) bool { return fresh || !w.req.Fresh }); ok {
		r.grant(chosen.req, cs, r.dequeued(chosen))
		return
	}
	if r.supWantsRoom() {
		r.closeConn(ctx, cs, ReasonEvicted)
		return
	}
	cs.phase = phaseIdle
	cs.idleSince = now
	cs.idleIdx = len(r.idle)
	r.idle = append(r.idle, cs)
	ctx.Send(cs.pid, &conn.WatchIdle{})
}

func (r *Route) grant(w *LeaseRequest, cs *connState, q queuedAt) {
	now := r.cfg.Now()
	var idleFor, waited time.Duration
	if !cs.idleSince.IsZero() {
		idleFor = now.Sub(cs.idleSince)
	}
	if q.pos > 0 {
		waited = now.Sub(q.at)
		r.recentWaits.add(Wait{At: now, Waited: waited, QueuePos: q.pos})
	}
	r.tel.LeaseGranted(waited)
	cs.phase = phaseLeased
	cs.idleSince = time.Time{}
	cs.leasedAt = r.cfg.Now()
	r.leases++
	if cs.served > 0 {
		r.reuses++
	}
	w.Reply <- LeaseResponse{Lease: Lease{ConnID: cs.id, Conn: cs.pid, Reused: cs.served > 0, IdleTime: idleFor,
		Waited: waited, QueuePos: q.pos, Dial: cs.dial, Release: cs.release}}
	cs.dial = DialTiming{}
}

// popIdle takes the most recently used idle connection that is still good,
// closing the expired ones it meets.
func (r *Route) popIdle(ctx actor.Context) *connState {
	now := r.cfg.Now()
	for len(r.idle) > 0 {
		cs := r.idle[len(r.idle)-1]
		r.removeIdle(cs)
		if reason, dead := r.expired(cs, now); dead {
			r.closeConn(ctx, cs, reason)
			continue
		}
		return cs
	}
	return nil
}

func (r *Route) removeIdle(cs *connState) {
	i := cs.idleIdx
	copy(r.idle[i:], r.idle[i+1:])
	r.idle[len(r.idle)-1] = nil
	r.idle = r.idle[:len(r.idle)-1]
	for j := i; j < len(r.idle); j++ {
		r.idle[j].idleIdx = j
	}
	cs.idleIdx = -1
}

// onStopping runs when the client closes (or the supervisor stops this route):
// every waiter is answered, every socket closed and reported.
func (r *Route) onStopping(ctx actor.Context) {
	r.closed = true
	r.pub.Stopped.Store(true)
	for {
		_, w, ok := r.waiters.Pop()
		if !ok {
			break
		}
		r.dequeued(w)
		w.req.Reply <- LeaseResponse{Err: ErrRouteClosed}
	}
	for _, cs := range r.conns {
		r.closeConn(ctx, cs, ReasonClientClosed)
	}
	// Permits granted after this point are dead letters: the supervisor reclaims
	// whatever this route still held when it sees the route terminate.
	r.publish()
}

func (r *Route) supWantsRoom() bool {
	return r.cfg.Sup != nil && r.cfg.Sup.PermitWaiters.Load() > 0
}
