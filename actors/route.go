package actors

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/actors/hedge"
	"github.com/connactor/connactor/actors/outlier"
	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/internal/mailbox"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
	"github.com/connactor/connactor/telemetry"
)

// RouteConfig is shared, read-only, by every route actor of a client.
type RouteConfig struct {
	MaxConnsPerRoute   int
	MaxPendingPerRoute int // callers waiting; one more is refused with ErrQueueFull (0 = unbounded)
	MaxDialsPerRoute   int // dials in flight (0 = MaxConnsPerRoute)
	MaxRequestsPerConn int // a connection is retired after this many requests (0 = no limit)
	MaxIdleTime        time.Duration
	MaxLifetime        time.Duration // each connection gets a lifetime in [90%, 100%] of it
	FailFast           FailFast
	// Rand draws uniformly from [0, 1) (jitter of lifetimes and cool-downs);
	// nil = math/rand/v2.
	Conn   *conn.Options
	Life   context.Context // ends when the client closes; bounds dials
	Logger *slog.Logger
	Now    func() time.Time // the clock (tests may fake it)
	// Tel receives connection and lease telemetry (nil = none).
	Tel *telemetry.Telemetry
	// Supervision governs the route's connection actors (see supervision.go).
	Supervision Supervision
	// Fault is the fault-injection hook of tests (nil in production).
	Fault FaultHook
	Rand  func() float64
	// Endpoints, when set, spreads the connections of routes to a host name
	// over the addresses it resolves to (endpoints.go); nil = every dial
	// goes by name.
	Endpoints *EndpointsConfig
	// Outlier, when set (its defaults filled), ejects an endpoint whose
	// exchanges keep failing (route_outlier.go); nil = endpoints are
	// ejected only when dials to them fail.
	Outlier *outlier.Policy
	// Hedge, when set, is the hedging policy (with its defaults) whose
	// state each route keeps (route_hedge.go); nil = no hedging.
	Hedge *hedge.Policy

	// Overload control (route_overload.go). Adaptive: each route sets its
	// own limit on its requests in flight (nil = fixed). QueueTarget: a
	// route whose callers keep waiting longer sheds them (0 = off).
	Adaptive    *AdaptiveLimit
	QueueTarget time.Duration

	// waitTimers lends the routes their long-wait timers (route_wait.go):
	// one pool per client, since each timer sends through the client's actor
	// system (and, under testing/synctest, belongs to its bubble). Set by
	// NewSupervisor; nil = each route makes its own.
	waitTimers *sync.Pool
}

// routePublished is what a route actor publishes for readers outside it,
// without a message. The route actor is the single writer of every field: it
// stores them after each message it handles (publish).
type routePublished struct {
	// Idle is the number of idle connections. Read by the supervisor (expiry
	// ticks go only to routes with idle connections) and the pool gauges.
	Idle atomic.Int32
	// Leased is the number of connections leased. Read by the pool gauges.
	Leased atomic.Int32
	// Pending is the number of callers waiting. Read by the supervisor
	// (expiry ticks also go to routes with waiters) and the pool gauges.
	Pending atomic.Int32
	// LRUIdleSince is when the least recently used idle connection became
	// idle (unix nanos; 0 = none). Read by the supervisor to choose which
	// route gives up an idle connection under MaxConnsTotal.
	LRUIdleSince atomic.Int64
	// FailFast is true while the route fails calls fast. Read by the pool gauges.
	FailFast atomic.Bool
	// LearnedIdle is the server's learned idle timeout (ns; 0 = none). Read
	// by the pool gauges.
	LearnedIdle atomic.Int64
	// Endpoints holds each endpoint's address and open connections (the
	// other fields zero), replaced whenever one of them changes; nil for a
	// route without endpoints. Read by the pool gauges.
	Endpoints atomic.Pointer[[]route.EndpointStats]
	// Spare is the number of spare connection actors (spareConns) of a route
	// that has no connection, with MaxIdleTime set (0 otherwise): the spares
	// an expiry tick may stop (expireSpares). Read by the supervisor, whose
	// expiry ticks also go to routes with such spares.
	Spare atomic.Int32
	// UnusedSince is when the route last became unused: no connection
	// leased or dialing, no waiter, no permit asked for (unix nanos; 0 = in
	// use). Read by the supervisor, whose expiry ticks also go to routes
	// unused for MaxIdleTime, which reclaim themselves once they have no
	// connection (route_reclaim.go).
	UnusedSince atomic.Int64
	// Reclaimed is set, before the route refuses its first lease, once the
	// route has reclaimed itself. Read by callers whose lease the route
	// refused (ErrRouteClosed) or whose route's Done closed: they ask the
	// supervisor for the route again instead of failing.
	Reclaimed atomic.Bool
	// HedgeDelay is the route's hedge delay measured at the policy's
	// percentile (ns; 0 = not known yet, or a fixed Delay). Read by callers,
	// who arm their hedge timer with it; the route decides each hedge again
	// when asked (route_hedge.go).
	HedgeDelay atomic.Int64
	// Limit is the route's limit on its requests in flight (limitNow).
	// Read by the pool gauges.
	Limit atomic.Int32
}

// Route is a route actor: it owns the connections of one route, their idle list
// (least recently used first) and the FIFO of waiting callers, and enforces
// MaxConnsPerRoute. It never blocks: dials and I/O happen in connection actors.
type Route struct {
	// Set when the route starts, never changed after.
	key        route.Key
	name       string
	cfg        *RouteConfig
	sup        *actor.PID
	self       *actor.PID
	pub        *routePublished  // what the route publishes for readers outside it (publish)
	mb         *mailbox.Mailbox // the route's own (routeParts); closed when it stops
	tel        *telemetry.Route
	permitReq  *PermitRequest // sent for every permit it asks for: never changed, only read by the supervisor
	h2Possible bool           // a dial may give an HTTP/2 connection (ALPN offers h2, or h2c)
	strict     bool           // HTTP2Config.StrictMaxConcurrentRequests

	// The message being handled.
	now time.Time // its time (clock); zero until asked
	// handling is the request (LeaseRequest, RouteStatsRequest,
	// CloseIdleRequest) the route is handling: answered at once, unless the
	// route failed while handling it, in which case its Stopping answers it
	// (answering an answered ticket does nothing). Cleared once handled, as
	// the supervisor's is: a LeaseRequest lives in its caller's Exchange,
	// which holds the request, its response and its connection.
	handling mailbox.Undeliverable

	// Connections: each one's state changes only in its transitions
	// (route_connstate.go).
	conns     map[uint64]*connState
	byPID     map[string]*connState
	h2        map[uint64]*http2Conn // the HTTP/2 connections of conns, by ID (their events name them)
	idle      []*connState          // LRU first, MRU last
	out       outbox                // what the route offers without a message (route_outbox.go)
	spares    spareConns            // connection actors without a socket (route_spares.go)
	nextID    uint64
	dialProto dialProto // what the route's dials give
	// h2Limit is the stream limit the route's server last announced
	// (SETTINGS; 0 = none yet): a new connection's until its own arrive.
	h2Limit int
	spread  h2Spread // HTTP/2 over the host's addresses (route_h2_spread.go)

	// Callers: the FIFO of those who wait (route_wait.go).
	waiters      WaitQueue[*wait.Ticket[Lease], waiter]
	freshWaiters int      // waiters that take only a connection that has served nothing
	longWait     longWait // the long-wait warning's timer

	// Growth: permits asked of the supervisor and dials (route_dial.go).
	dialing, permitsPending int
	withdrawing             int  // permits asked back (PermitWithdrawRequest), not yet answered
	dialsFailing            bool // the last dial failed; logged once per change
	breaker                 breaker
	eps                     routeEndpoints // the host's addresses (route_endpoints.go)

	// What the supervisor and the client want of the route.
	closed     bool // the route stops: it refuses leases
	roomWanted bool // the supervisor wants freed connections closed (RoomWanted)
	shed       bool // ... even when own waiters wait: above the fleet share
	// fleetShare is the route's fleet share as the supervisor told it
	// (FleetShareTold): the most connections the route may hold, once a
	// share was told (fleetBudget > 0). The route counts it in its limit
	// (limitNow); the supervisor's permits enforce it.
	fleetShare, fleetBudget int
	// hostCap is MaxConnsPerHost (0: none): the most connections the route
	// could hold, if it held all of its host's. The supervisor enforces it.
	hostCap int
	// unusedSince is when the route last became unused (zero while in use;
	// route_reclaim.go).
	unusedSince time.Time

	// Policies the route holds, fed by its messages.
	learner idleLearner // the server's idle timeout, learned from its closes (policy.go)
	hedge   routeHedge  // hedged requests: latency, budget, counts (route_hedge.go)
	ov      overload    // the adaptive limit and the shedding of a standing queue (route_overload.go)

	// Statistics (route_stats.go). The lease counters are written by the
	// transitions only (toLeased, toFree).
	opened, closedN, leases, reuses uint64
	offeredN                        uint64 // leases taken from the outbox
	dialFailures, leaseTimeouts     uint64
	queueFull                       uint64 // callers refused with ErrQueueFull
	closedBy                        map[string]uint64
	recentCloses                    ring[route.ClosedConn]
	recentWaits                     ring[route.Wait]
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

// NewRoute returns the producer of the route actor for k, reporting to sup,
// made of parts.
func NewRoute(k route.Key, cfg *RouteConfig, sup *actor.PID, parts routeParts) actor.Producer {
	return func() actor.Actor {
		r := &Route{key: k, name: k.String(), cfg: cfg, sup: sup, pub: parts.pub, mb: parts.mb, out: outbox{ch: parts.outbox},
			conns: map[uint64]*connState{}, byPID: map[string]*connState{}, h2: map[uint64]*http2Conn{},
			closedBy: map[string]uint64{}, breaker: breaker{cfg: cfg.FailFast}, tel: parts.tel, hostCap: parts.hostCap}
		r.h2Possible, r.strict = h2Possible(k, cfg)
		r.eps = newRouteEndpoints(k, cfg)
		r.hedge.policy = cfg.Hedge
		if cfg.Hedge.Measured() {
			r.hedge.sketch = new(hedge.Sketch) // 1.6 KB a route only where the delay is measured
		}
		r.ov = newOverload(cfg, r.h2Possible)
		return r
	}
}

// Receive handles the route actor's messages. Every handler may free or need
// connections, so the tail (ask for permits, publish the counters) runs once
// after the switch.
func (r *Route) Receive(ctx actor.Context) {
	msg := ctx.Message()
	r.now = time.Time{}
	switch m := msg.(type) {
	case *LeaseRequest, *RouteStatsRequest, *CloseIdleRequest:
		r.handling = m.(mailbox.Undeliverable)
	}
	if r.cfg.Fault != nil {
		r.cfg.Fault("route", msg)
	}
	switch m := msg.(type) {
	case *LeaseRequest:
		r.onLease(ctx, m)
	case *LeaseCancelled:
		r.onLeaseCancelled(ctx, m)
	case *Released:
		r.onReleased(ctx, m)
	case *PermitGranted:
		r.onPermit(ctx)
	case *PermitWithdrawResponse:
		r.permitsPending -= m.Taken
		r.withdrawing -= m.Asked
	case *RoomWanted:
		r.onRoomWanted(ctx, m)
	case *conn.Dialed:
		r.onDialed(ctx, m)
	case *conn.IdleBroken:
		r.onIdleBroken(ctx, m)
	case *OfferDeclined:
		r.onOfferDeclined(ctx, m)
	case *FleetShareTold:
		r.fleetShare, r.fleetBudget = m.Share, m.Budget
	case *HedgeWon:
		r.hedge.wins++
	case *conn.Recycled:
		r.spares.recycled(m.PID)
	case *conn.StreamsChanged:
		r.onStreamsChanged(ctx, m)
	case *conn.DrainStarted:
		r.onDrainStarted(ctx, m)
	case *conn.H2Closed:
		r.onH2Closed(ctx, m)
	case *EndpointsResolved:
		r.onEndpointsResolved(ctx, m)
	case *EvictIdleRequest:
		r.onEvictIdle(ctx)
		return // answered after publishing (see onEvictIdle)
	case *ExpiryTicked:
		r.takeBack()
		r.onExpire(ctx, m.Now)
		r.expireSpares(ctx, m.Now)
		r.reclaimIfUnused(ctx, m.Now)
	case *longWaitChecked:
		r.onLongWaitChecked(ctx)
	case *shedTicked:
		r.onShedTicked()
	case *CloseIdleRequest:
		r.onCloseIdle(ctx, m)
	case *RouteStatsRequest:
		m.Ticket.Deliver(r.stats())
		r.handling = nil
		return
	case *actor.Started:
		r.self = ctx.Self()
		r.permitReq = &PermitRequest{From: r.self}
		r.publishUnused(0) // unused until its first lease
		return
	case *actor.Stopping:
		r.onStopping(ctx)
	case *actor.Terminated:
		r.onTerminated(ctx, m)
	case *actor.Stopped:
		r.mb.Close() // what reaches the route from now on is answered (Undeliverable)
		return
	case *actor.Restarting:
		return
	default:
		r.cfg.Logger.Warn("route: unknown message", "route", r.name, "type", fmt.Sprintf("%T", m))
		return
	}
	r.handling = nil
	r.shedStanding()
	r.serveHeld(ctx)
	r.shedStanding()
	r.armShedTick(ctx)
	r.wantConns(ctx)
	r.withdrawPermits(ctx)
	r.refill()
	r.publish()
}

// clock returns the time of the message being handled, read once per message:
// a lease or a release asked for it up to three times, and time.Now costs
// about 50 ns on the machines the benchmarks run on.
func (r *Route) clock() time.Time {
	if r.now.IsZero() {
		r.now = r.cfg.Now()
	}
	return r.now
}

// onRoomWanted keeps what the supervisor wants of the route's freed
// connections (see RoomWanted).
func (r *Route) onRoomWanted(ctx actor.Context, m *RoomWanted) {
	r.roomWanted, r.shed = m.Wanted, m.Shed
	if m.Wanted {
		r.takeBack() // nothing stays on offer while room is wanted
	}
	if m.Wanted && !m.Shed && len(r.idle) > 0 {
		// The supervisor saw nothing idle when it asked: a connection
		// that went idle since is the room it wants. Above a fleet
		// share it evicts the idle ones itself (enforceShare, and its
		// fleet tick for those that appear later): closing one here
		// too would shed two for one.
		r.closeConn(ctx, r.idle[0], route.ReasonEvicted)
	}
}

// onCloseIdle closes every idle connection, those on offer included, and
// answers how many it closed.
func (r *Route) onCloseIdle(ctx actor.Context, m *CloseIdleRequest) {
	r.takeBack()
	n := len(r.idle)
	for len(r.idle) > 0 {
		r.closeConn(ctx, r.idle[0], route.ReasonCloseIdle)
	}
	m.Ticket.Deliver(n)
}

// onStopping runs when the client closes, or the supervisor stops this route
// (for a failure of the route's, too): every waiter is answered (the request
// the route failed while handling too), every socket closed and reported.
// Requests that reach the route from now on are answered by the route
// (ErrRouteClosed) or, once it has stopped, by its mailbox.
//
// The waiters are answered first, and a failure while closing the sockets is
// logged, not raised: a Stopping that panics would leave protoactor's stop
// unfinished (the route would never stop, nor its mailbox close).
func (r *Route) onStopping(ctx actor.Context) {
	r.closed = true
	r.stopLongWait()
	r.stopShedTick()
	if r.handling != nil {
		r.handling.Undelivered()
		r.handling = nil
	}
	for {
		_, w, ok := r.waiters.Pop()
		if !ok {
			break
		}
		r.dequeued(w)
		w.req.Ticket.Reject(ErrRouteClosed)
	}
	defer func() {
		if v := recover(); v != nil {
			r.cfg.Logger.Error("connactor: route failed while closing its connections", "route", r.name, "reason", fmt.Sprint(v))
		}
	}()
	for _, cs := range r.conns {
		r.closeConn(ctx, cs, route.ReasonClientClosed)
	}
	// Permits granted after this point are dead letters: the supervisor reclaims
	// whatever this route still held when it sees the route terminate.
}
