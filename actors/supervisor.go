package actors

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/internal/mailbox"
	"github.com/connactor/connactor/route"
)

// SupervisorConfig is the supervisor's read-only configuration.
type SupervisorConfig struct {
	Route         *RouteConfig
	MaxConnsTotal int
	// MaxConnsPerHost caps the connections to one host:port across all its
	// routes (proxies, identities); 0 = no cap. Permits are still granted in
	// arrival order among the routes of a host.
	MaxConnsPerHost int
	ExpiryInterval  time.Duration // how often idle connections are checked
	// Go starts a goroutine owned by the client (it waits for them on Close).
	Go     func(func())
	Logger *slog.Logger
	// Mailbox is the supervisor's mailbox, which the pool made and posts its
	// requests to; the supervisor closes it when it stops for good, so that
	// what reaches it afterwards is answered (nil: none to close). It
	// survives the supervisor's restarts: what waits there is answered by the
	// restarted instance.
	Mailbox *mailbox.Mailbox
	// RouteStopped is called by the supervisor, in its Receive, once a route
	// actor has stopped and its Done has closed (reclaimed unused, failed, or
	// the client closing): the pool drops the route's handle from its cache,
	// so that a client calling many hosts once keeps none of them. It must
	// not block. nil = nothing to drop.
	RouteStopped func(*routeHandle)
	// NewRoute makes the producer of a route actor; nil = NewRoute. Tests use it
	// to drive the supervisor with fake routes.
	NewRoute func(k route.Key, cfg *RouteConfig, sup *actor.PID, parts routeParts) actor.Producer

	// Fleet is the node's fleet budget keeper (FleetKeeper.PID); nil = no
	// fleet budget. With it the supervisor tells the keeper each route's
	// demand (UsageReported, on change only) and grants a route a permit
	// only while the route holds less than its share (ShareChanged); see
	// supervisor_fleet.go.
	Fleet *actor.PID
	// FleetInterval is how often the supervisor looks at the routes'
	// published idle and waiting counts for a change to report to Fleet
	// (default 100ms). Changes the supervisor sees by message (permits asked,
	// granted, given back) are reported at once.
	FleetInterval time.Duration
}

// RouteInlineBudget is how many messages a route actor processes on a sender's
// goroutine when it was idle (see internal/mailbox): enough for a lease or a release
// and what arrives with it, small enough that no caller works long for others.
const RouteInlineBudget = 16

// SupervisorInlineBudget is the supervisor's: a permit, a freed place and the
// grants they allow, on the goroutine of the route that sent them.
const SupervisorInlineBudget = 16

// The supervisor's mailbox (SupervisorConfig.Mailbox) is inline-first too,
// like the routes'. The supervisor never blocks, so a PermitRequest or a
// ConnClosed is handled on the sending route's goroutine (usually a
// caller's), and the PermitGranted it sends back queues behind the route's
// current message on that same goroutine: a dial costs no goroutine switch
// and no goroutine started for the supervisor (protoactor's default mailbox
// starts one per wake-up, whose stack then grows through the route's and the
// connection actor's frames).

type routeEntry struct {
	h        *routeHandle
	name     string        // h.Key.String(): the fleet budget's route
	host     string        // the target's host:port (MaxConnsPerHost)
	done     chan struct{} // h.Done, closed once the route actor has stopped
	held     int           // permits granted and not yet given back (open or dialing connections)
	queued   int           // permits of this route waiting in the supervisor's queue
	evicting bool          // an EvictIdleRequest to it is unanswered
	// roomTotal: room is wanted of this route under MaxConnsTotal or
	// MaxConnsPerHost (wantRoom). room: what the route was last told
	// (RoomWanted): roomTotal, or the route holds more than its fleet share.
	roomTotal, room bool
	shed            bool // told RoomWanted{Shed: true}: it holds more than its fleet share
	reclaimed       bool // the route reclaimed itself (RouteReclaimed): it is stopping
	fleetRoute           // the fleet share and the last usage reported
	idx             int  // its place in Supervisor.list
	holdIdx         int  // its place in Supervisor.holding while held > 0, else -1
}

// Supervisor is the supervisor actor: it starts one route actor per route and
// supervises them, enforces MaxConnsTotal (granting connection permits in FIFO
// order, evicting the least recently used idle connection of any route when the
// total is reached, asking routes for freed connections when none is idle),
// keeps each route within its fleet share when a fleet budget is on
// (supervisor_fleet.go), and runs idle and lifetime expiry.
type Supervisor struct {
	cfg  *SupervisorConfig
	self *actor.PID
	// handling is the last request (RouteRequest, StatsRequest) the
	// supervisor took up: answered at once, unless the supervisor failed
	// while handling it, in which case its Restarting or Stopping answers it
	// (answering an answered ticket does nothing). Cleared once answered:
	// the last StatsResponse lists every route's handle, and a handle's PID
	// keeps its actor reachable, reclaimed or not.
	handling any

	routes map[route.Key]*routeEntry
	byID   map[string]*routeEntry
	// list holds the entries of byID in a slice (routeEntry.idx), for the
	// passes over every route (an eviction's search for the least recently
	// used idle connection, wanting room, ticks): iterating a slice costs a
	// fraction of iterating a map (BenchmarkLRUIdleRoute).
	list     []*routeEntry
	total    int
	hostHeld map[string]int                // permits held per host (MaxConnsPerHost)
	permits  WaitQueue[uint64, *actor.PID] // routes waiting for room, FIFO (numbered by permitN)
	permitN  uint64
	evicting int // routes with an EvictIdleRequest unanswered (routeEntry.evicting)
	roomN    int // routes with roomTotal set
	closing  bool
	fleet    fleetState // fleet budgets (supervisor_fleet.go)
	// resolvers are the hosts' resolvers, by host, and resolverHost their
	// hosts, by PID Id (supervisor_endpoints.go); nil until the first.
	resolvers    map[string]*hostResolver
	resolverHost map[string]string

	// peakRoutes is the most entries list had since the maps were last
	// rebuilt (compactRoutes).
	peakRoutes int
	// holding lists the routes that hold a permit (held > 0,
	// routeEntry.holdIdx): the only ones that can have an idle connection to
	// evict (lruIdleRoute), far fewer than the routes when most were used
	// once.
	holding []holder

	stopTicker chan struct{}

	evictions, expired, dialFailures, restarts, reclaimed uint64
}

// NewSupervisor returns the supervisor's producer.
func NewSupervisor(cfg *SupervisorConfig) actor.Producer {
	if cfg.Route != nil && cfg.Route.waitTimers == nil {
		cfg.Route.waitTimers = &sync.Pool{}
	}
	return func() actor.Actor {
		return &Supervisor{cfg: cfg, routes: map[route.Key]*routeEntry{}, byID: map[string]*routeEntry{},
			hostHeld: map[string]int{}, fleet: newFleetState()}
	}
}

// Receive handles the supervisor's messages.
func (s *Supervisor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	switch msg.(type) {
	case *RouteRequest, *StatsRequest:
		s.handling = msg
	}
	if s.cfg.Route.Fault != nil {
		s.cfg.Route.Fault("supervisor", msg)
	}
	switch m := msg.(type) {
	case *RouteRequest:
		s.onRouteRequest(ctx, m)
		s.handling = nil
		return
	case *PermitRequest:
		s.onPermitRequest(ctx, m)
	case *PermitReturned:
		s.freePlace(ctx, m.From)
	case *PermitWithdrawRequest:
		s.onPermitWithdraw(ctx, m)
	case *ConnClosed:
		s.onConnClosed(ctx, m)
	case *IdleEvicted:
		s.onIdleEvicted(ctx, m)
	case *ShareChanged:
		s.onShareChanged(ctx, m)
	case *fleetTick:
		s.onFleetTick(ctx)
	case *RouteReclaimed:
		s.onRouteReclaimed(ctx, m)
		return
	case *LongWaitNoticed:
		s.onLongWaitNoticed(m)
		return
	case *StatsRequest:
		m.Ticket.Deliver(s.statsResponse())
		s.handling = nil
		return
	case *expiryTick:
		s.onExpiryTick(ctx)
		return
	case *actor.Started:
		s.onStarted(ctx)
		return
	case *actor.Terminated:
		s.onTerminated(ctx, m)
	case *actor.Restarting:
		s.cfg.Logger.Error("connactor: supervisor failed; restarting with every route closed")
		s.closing = true // this instance is done; its routes stop
		s.end(ErrSupervisorFailed)
		return
	case *actor.Stopping:
		s.closing = true
		s.end(ErrClosing)
		return
	case *actor.Stopped:
		if s.cfg.Mailbox != nil {
			s.cfg.Mailbox.Close() // what reaches it from now on is answered (Undeliverable)
		}
		return
	default:
		s.cfg.Logger.Warn("supervisor: unknown message", "type", fmt.Sprintf("%T", m))
		return
	}
	s.grantPermits(ctx)
}

type expiryTick struct{ now time.Time }

func (s *Supervisor) onStarted(ctx actor.Context) {
	s.self = ctx.Self()
	if s.cfg.Fleet != nil {
		// Every share is 0 until told; after a restart, the keeper tells again.
		ctx.Send(s.cfg.Fleet, &SharesRequest{})
	}
	expiry, fleetEvery := s.cfg.ExpiryInterval, s.fleetInterval()
	if expiry <= 0 && fleetEvery <= 0 {
		return
	}
	stop := make(chan struct{})
	s.stopTicker = stop
	sys, self := ctx.ActorSystem(), ctx.Self()
	s.cfg.Go(func() { // owned by the client's WaitGroup; ends when the supervisor stops or restarts
		var expiryC, fleetC <-chan time.Time
		if expiry > 0 {
			t := time.NewTicker(expiry)
			defer t.Stop()
			expiryC = t.C
		}
		if fleetEvery > 0 {
			t := time.NewTicker(fleetEvery)
			defer t.Stop()
			fleetC = t.C
		}
		for {
			select {
			case <-stop:
				return
			case now := <-expiryC:
				sys.Root.Send(self, &expiryTick{now: now})
			case <-fleetC:
				sys.Root.Send(self, theFleetTick)
			}
		}
	})
}

// end ends this instance: its ticker stops, and the request it failed while
// handling, if any, is answered with err (ErrSupervisorFailed for a restart).
// protoactor then stops the route actors, whose Terminated close their Done.
func (s *Supervisor) end(err error) {
	if s.stopTicker != nil {
		close(s.stopTicker)
		s.stopTicker = nil
	}
	switch m := s.handling.(type) {
	case *RouteRequest:
		m.Ticket.Reject(err)
	case *StatsRequest:
		m.Ticket.Reject(err)
	}
	s.handling = nil
}

func (s *Supervisor) onRouteRequest(ctx actor.Context, m *RouteRequest) {
	if s.closing {
		m.Ticket.Reject(ErrClosing)
		return
	}
	if e := s.routes[m.Key]; e != nil {
		m.Ticket.Deliver(e.h)
		return
	}
	parts := routeParts{pub: &routePublished{}, mb: mailbox.New(RouteInlineBudget),
		outbox:  make(chan offer, outboxDepth(m.Key, s.cfg.Route)),
		tel:     s.cfg.Route.Tel.ActorRoute(m.Key.Scheme, m.Key.Host, m.Key.Port),
		hostCap: s.cfg.MaxConnsPerHost}
	fp := &fleetPublished{}
	newRoute := s.cfg.NewRoute
	if newRoute == nil {
		newRoute = NewRoute
	}
	props := actor.PropsFromProducer(newRoute(m.Key, s.cfg.Route, ctx.Self(), parts),
		actor.WithSupervisor(s.cfg.Route.Supervision.Conn), actor.WithMailbox(parts.mb.Producer()))
	pid := ctx.Spawn(props)
	done := make(chan struct{})
	h := &routeHandle{Key: m.Key, PID: pid, Pub: parts.pub, Fleet: fp, Done: done,
		mb: parts.mb, outbox: parts.outbox, tel: parts.tel}
	e := &routeEntry{h: h, host: m.Key.Addr(), done: done}
	s.addRoute(e)
	s.fleetRouteStarted(ctx, e)
	s.watchEndpoints(ctx, e)
	m.Ticket.Deliver(e.h) // a waiter that left finds the route cached here next time
}

func (s *Supervisor) onPermitRequest(ctx actor.Context, m *PermitRequest) {
	e := s.byID[m.From.Id]
	if e == nil {
		return // a route that has stopped
	}
	s.permitN++
	s.permits.Push(s.permitN, m.From)
	e.queued++
	s.report(ctx, e)
}

// grantPermits grants queued permits in arrival order while MaxConnsTotal
// and MaxConnsPerHost allow: a waiter whose host is at its cap lets waiters of
// other hosts behind it pass, and is served first among its host's. With a
// fleet budget, a route that holds its share gets no permit: its waiters let
// the others pass, and no room is made for them. When nothing more can be
// granted, it makes room for the oldest waiter the fleet allows: it asks the
// route with the least recently used idle connection (of that waiter's host,
// when the host cap blocks) to close it, or, with no such idle connection,
// asks the routes holding connections (of that host) to close the next one
// they free (RoomWanted). Runs after every message that may free a place or
// queue a permit.
func (s *Supervisor) grantPermits(ctx actor.Context) {
	for {
		_, first, ok := s.permits.Find(s.fleetAllows)
		if !ok {
			break // nothing queued, or every route queued holds its share
		}
		if s.total >= s.cfg.MaxConnsTotal {
			s.makeRoom(ctx, "")
			return
		}
		_, pid, ok := s.permits.TakeFirst(s.grantable)
		if !ok {
			s.makeRoom(ctx, s.byID[first.Id].host)
			return
		}
		// Every queued permit is a live route's: a route's permits leave the
		// queue when it stops (dropQueued).
		e := s.byID[pid.Id]
		e.queued--
		e.held++
		s.holdChanged(e)
		s.total++
		s.hostHeld[e.host]++
		ctx.Send(pid, &PermitGranted{})
		s.report(ctx, e)
	}
	s.wantRoom(ctx, false, "")
}

// grantable reports whether the route of a queued permit may get one now,
// under MaxConnsPerHost and its fleet share.
func (s *Supervisor) grantable(pid *actor.PID) bool {
	e := s.byID[pid.Id]
	return (s.cfg.MaxConnsPerHost <= 0 || s.hostHeld[e.host] < s.cfg.MaxConnsPerHost) && s.underShare(e)
}

func (s *Supervisor) onConnClosed(ctx actor.Context, m *ConnClosed) {
	switch m.Reason {
	case route.ReasonEvicted:
		s.evictions++
	case route.ReasonIdleExpired, route.ReasonLifetime, route.ReasonKeepAlive:
		s.expired++
	case route.ReasonDialFailed:
		s.dialFailures++
	}
	s.freePlace(ctx, m.From)
}

func (s *Supervisor) freePlace(ctx actor.Context, from *actor.PID) {
	e := s.byID[from.Id]
	if e == nil {
		return // the route terminated and its places were reclaimed
	}
	e.held--
	s.holdChanged(e)
	s.total--
	s.hostHeld[e.host]--
	if e.held < 0 || s.total < 0 || s.hostHeld[e.host] < 0 {
		panic("actors: internal error: connection place freed twice")
	}
	if s.hostHeld[e.host] == 0 {
		delete(s.hostHeld, e.host)
	}
	s.report(ctx, e)
	s.enforceShare(ctx, e)
}

// onTerminated handles a route actor that stopped: its Done closes (every
// caller waiting on it wakes), and the places it held are free again. Its
// sockets are closed: protoactor stopped its connection actors first; so the
// keeper hears that the route holds nothing (also when the client closes or
// the supervisor restarts: protoactor delivers its children's Terminated).
// The permits it still had queued leave the queue (dropQueued), and the pool
// drops its handle (RouteStopped). A route stops on its own when it failed,
// or once it reclaimed itself unused (route_reclaim.go).
func (s *Supervisor) onTerminated(ctx actor.Context, m *actor.Terminated) {
	clearStoppedChild(ctx)
	e := s.byID[m.Who.Id]
	if e == nil {
		s.resolverStopped(ctx, m.Who)
		return
	}
	s.removeRoute(ctx, e)
	s.unwatchEndpoints(ctx, e)
	close(e.done)
	if !s.closing && !e.reclaimed {
		s.restarts++ // it failed
	}
	if s.cfg.RouteStopped != nil {
		s.cfg.RouteStopped(e.h)
	}
	if e.roomTotal {
		s.roomN--
	}
	if e.evicting {
		s.evicting--
	}
	if e.queued > 0 {
		s.dropQueued(m.Who.Id, e.queued)
		e.queued = 0
	}
	s.total -= e.held
	if s.hostHeld[e.host] -= e.held; s.hostHeld[e.host] <= 0 {
		delete(s.hostHeld, e.host)
	}
	e.held = 0
	s.holdChanged(e)
	s.fleetRouteStopped(ctx, e)
}

// onPermitWithdraw takes back permits a route no longer needs, the newest
// first, so that the oldest keep their places.
func (s *Supervisor) onPermitWithdraw(ctx actor.Context, m *PermitWithdrawRequest) {
	taken := 0
	if e := s.byID[m.From.Id]; e != nil && e.queued > 0 {
		taken = s.dropQueued(m.From.Id, min(m.N, e.queued))
		e.queued -= taken
		s.report(ctx, e)
	}
	ctx.Send(m.From, &PermitWithdrawResponse{Asked: m.N, Taken: taken})
}

// dropQueued takes up to n of a route's queued permits out of the queue, the
// newest first, and returns how many it took: those of a stopped route (left
// there, the first of them would make room, evicting or wanting room of
// other routes, for a route that no longer exists), or those a route
// withdrew. It costs a pass over the queue.
func (s *Supervisor) dropQueued(id string, n int) int {
	var ids []uint64
	s.permits.Each(func(k uint64, pid *actor.PID) {
		if pid.Id == id {
			ids = append(ids, k)
		}
	})
	ids = ids[max(0, len(ids)-n):]
	for _, k := range ids {
		s.permits.Remove(k)
	}
	return len(ids)
}

// addRoute records a route actor the supervisor started.
func (s *Supervisor) addRoute(e *routeEntry) {
	s.routes[e.h.Key] = e
	s.byID[e.h.PID.Id] = e
	e.idx, e.holdIdx = len(s.list), -1
	s.list = append(s.list, e)
	s.peakRoutes = max(s.peakRoutes, len(s.list))
}

// removeRoute forgets a route actor that stopped: the last entry of list
// takes its place.
func (s *Supervisor) removeRoute(ctx actor.Context, e *routeEntry) {
	delete(s.byID, e.h.PID.Id)
	if s.routes[e.h.Key] == e {
		delete(s.routes, e.h.Key)
	}
	last := s.list[len(s.list)-1]
	s.list[e.idx], last.idx = last, e.idx
	s.list[len(s.list)-1] = nil
	s.list = s.list[:len(s.list)-1]
	s.compactRoutes(ctx)
}

// onExpiryTick sends ExpiryTicked to the routes with idle connections, with
// spare connection actors to stop, or unused for MaxIdleTime (which reclaim
// themselves). A pass over the routes, one to three atomic loads each.
func (s *Supervisor) onExpiryTick(ctx actor.Context) {
	now := s.cfg.Route.Now()
	msg := &ExpiryTicked{Now: now}
	unusedBy := int64(0) // routes unused since then (or before) may reclaim themselves
	if s.cfg.Route.MaxIdleTime > 0 {
		unusedBy = now.Add(-s.cfg.Route.MaxIdleTime).UnixNano()
	}
	for _, e := range s.list {
		pub := e.h.Pub
		if pub.Idle.Load() > 0 || pub.Spare.Load() > 0 ||
			!e.reclaimed && unusedBy != 0 && pub.UnusedSince.Load() != 0 && pub.UnusedSince.Load() <= unusedBy {
			ctx.Send(e.h.PID, msg)
		}
	}
}

func (s *Supervisor) statsResponse() StatsResponse {
	hs := make([]*routeHandle, 0, len(s.list))
	for _, e := range s.list {
		hs = append(hs, e.h)
	}
	return StatsResponse{Routes: hs, Total: s.total, MaxTotal: s.cfg.MaxConnsTotal,
		PermitWaiters: s.permits.Len(), Evictions: s.evictions, Expired: s.expired,
		DialFailures: s.dialFailures, Restarts: s.restarts, Reclaimed: s.reclaimed}
}
