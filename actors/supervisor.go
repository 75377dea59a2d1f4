package actors

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/route"
)

// SupervisorConfig is the supervisor's read-only configuration.
type SupervisorConfig struct {
	Route                 *RouteConfig
	MaxConnsTotal         int
	MaxConcurrentRequests int
	ExpiryInterval        time.Duration // how often idle connections are checked
	Pub                   *SupervisorPublished
	// Go starts a goroutine owned by the client (it waits for them on Close).
	Go func(func())
	// Serve performs one request for a caller that is an actor (HTTPRequest); it
	// runs on a goroutine started with Go, never in Receive.
	Serve  func(*http.Request) (*http.Response, error)
	Logger *slog.Logger
	// NewRoute makes the producer of a route actor; nil = NewRoute. Tests use it
	// to drive the supervisor with fake routes.
	NewRoute func(k route.Key, cfg *RouteConfig, sup *actor.PID, pub *RoutePublished) actor.Producer
}

// SupervisorPublished holds what the supervisor publishes for readers outside it.
// InFlight is the admission counter (see TryAdmit): the one piece of state that
// callers change without a message, so that the request path does not visit the
// supervisor while fewer than MaxConcurrentRequests requests are in flight.
type SupervisorPublished struct {
	InFlight      atomic.Int64 // admitted requests
	AdmitWaiters  atomic.Int64 // callers queued for admission
	PermitWaiters atomic.Int64 // routes' permit requests waiting for room
	Total         atomic.Int64 // connections open or being dialed, all routes
}

// TryAdmit takes one admission if fewer than max requests are in flight and
// nobody is queued for admission (so the queue stays FIFO). It never blocks.
func (p *SupervisorPublished) TryAdmit(max int64) bool {
	if p.AdmitWaiters.Load() > 0 {
		return false
	}
	return p.tryTake(max)
}

func (p *SupervisorPublished) tryTake(max int64) bool {
	for {
		n := p.InFlight.Load()
		if n >= max {
			return false
		}
		if p.InFlight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Unadmit gives an admission back; it reports whether callers are queued, in
// which case the caller must send AdmitWake to the supervisor.
func (p *SupervisorPublished) Unadmit() (wake bool) {
	if p.InFlight.Add(-1) < 0 {
		panic("actors: internal error: admission released twice")
	}
	return p.AdmitWaiters.Load() > 0
}

type routeEntry struct {
	h    *RouteHandle
	held int // permits granted and not yet given back (open or dialing connections)
}

// Supervisor is the supervisor actor: it starts one route actor per route and
// supervises them, enforces MaxConnsTotal (granting connection permits in FIFO
// order, evicting the least recently used idle connection of any route when the
// total is reached) and the admission queue of MaxConcurrentRequests, and runs
// idle and lifetime expiry.
type Supervisor struct {
	cfg  *SupervisorConfig
	self *actor.PID

	routes  map[route.Key]*routeEntry
	byID    map[string]*routeEntry
	total   int
	permits WaitQueue[*actor.PID] // routes waiting for room, FIFO
	permitN uint64
	evict   bool // an EvictIdleRequest is in flight
	admits  WaitQueue[*AdmitRequest]
	closing bool

	stopTicker chan struct{}

	evictions, expired, dialFailures uint64
	closedBy                         map[CloseReason]uint64
}

// NewSupervisor returns the supervisor's producer.
func NewSupervisor(cfg *SupervisorConfig) actor.Producer {
	return func() actor.Actor {
		return &Supervisor{cfg: cfg, routes: map[route.Key]*routeEntry{}, byID: map[string]*routeEntry{},
			closedBy: map[CloseReason]uint64{}}
	}
}

// RouteInlineBudget is how many messages a route actor processes on a sender's
// goroutine when it was idle (see InlineMailbox): enough for a lease or a release
// and what arrives with it, small enough that no caller works long for others.
const RouteInlineBudget = 16

// RouteStrategy stops a route actor that panics instead of restarting it: a
// restarted instance would have lost track of its sockets. The supervisor then
// reclaims the route's places and the next request starts a new route actor.
var RouteStrategy = actor.NewOneForOneStrategy(0, 0, func(reason interface{}) actor.Directive {
	return actor.StopDirective
})

// Receive handles the supervisor's messages.
func (s *Supervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *LeaseRequest:
		// Not ours: a lease sent to a route that had stopped and was re-routed.
		m.Reply <- LeaseResponse{Err: ErrRouteClosed}
	case *RouteRequest:
		s.onRouteRequest(ctx, m)
	case *PermitRequest:
		s.onPermitRequest(ctx, m)
	case *PermitReturned:
		s.freePlace(ctx, m.From)
	case *ConnClosed:
		s.onConnClosed(ctx, m)
	case *EvictIdleResponse:
		s.evict = false
		s.grantPermits(ctx)
	case *AdmitRequest:
		s.onAdmitRequest(m)
	case *AdmitCancel:
		s.onAdmitCancel(m)
	case *AdmitWake:
		s.admit()
	case *StatsRequest:
		m.Reply <- s.statsResponse()
	case *HTTPRequest:
		s.onHTTPRequest(ctx, m)
	case *expiryTick:
		s.onExpiryTick(ctx)
	case *actor.Started:
		s.onStarted(ctx)
	case *actor.Terminated:
		s.onTerminated(ctx, m)
	case *actor.Stopping:
		s.onStopping()
	case *actor.Stopped, *actor.Restarting:
	default:
		s.cfg.Logger.Warn("supervisor: unknown message", "type", fmt.Sprintf("%T", m))
	}
}

type expiryTick struct{ now time.Time }

func (s *Supervisor) onStarted(ctx actor.Context) {
	s.self = ctx.Self()
	if s.cfg.ExpiryInterval <= 0 {
		return
	}
	stop := make(chan struct{})
	s.stopTicker = stop
	sys, self, every := ctx.ActorSystem(), ctx.Self(), s.cfg.ExpiryInterval
	s.cfg.Go(func() { // owned by the client's WaitGroup; ends when the supervisor stops
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				sys.Root.Send(self, &expiryTick{now: now})
			}
		}
	})
}

func (s *Supervisor) onStopping() {
	s.closing = true
	if s.stopTicker != nil {
		close(s.stopTicker)
		s.stopTicker = nil
	}
	for {
		_, a, ok := s.admits.Pop()
		if !ok {
			break
		}
		s.cfg.Pub.AdmitWaiters.Add(-1)
		a.Reply <- ErrRouteClosed
	}
}

func (s *Supervisor) onRouteRequest(ctx actor.Context, m *RouteRequest) {
	if s.closing {
		m.Reply <- RouteResponse{Err: ErrRouteClosed}
		return
	}
	if e := s.routes[m.Key]; e != nil && !e.h.Pub.Stopped.Load() {
		m.Reply <- RouteResponse{Route: e.h}
		return
	}
	pub := &RoutePublished{}
	newRoute := s.cfg.NewRoute
	if newRoute == nil {
		newRoute = NewRoute
	}
	props := actor.PropsFromProducer(newRoute(m.Key, s.cfg.Route, ctx.Self(), pub),
		actor.WithSupervisor(actor.NewOneForOneStrategy(0, 0, func(reason interface{}) actor.Directive {
			s.cfg.Logger.Error("connection actor failed", "reason", fmt.Sprint(reason))
			return actor.StopDirective
		})), actor.WithMailbox(InlineMailbox(RouteInlineBudget)))
	pid := ctx.Spawn(props)
	e := &routeEntry{h: &RouteHandle{Key: m.Key, PID: pid, Pub: pub}}
	s.routes[m.Key] = e
	s.byID[pid.Id] = e
	m.Reply <- RouteResponse{Route: e.h}
}

func (s *Supervisor) onPermitRequest(ctx actor.Context, m *PermitRequest) {
	if s.byID[m.From.Id] == nil {
		return // a route that has stopped
	}
	s.permitN++
	s.permits.Push(s.permitN, m.From)
	// grantPermits publishes PermitWaiters once it has granted what it can:
	// publishing the queue before would make routes give up connections for
	// a request about to be granted at once.
	s.grantPermits(ctx)
}

// grantPermits grants queued permits while the total allows; when it does not,
// it asks the route with the least recently used idle connection to close it.
func (s *Supervisor) grantPermits(ctx actor.Context) {
	defer func() {
		s.cfg.Pub.PermitWaiters.Store(int64(s.permits.Len()))
		s.cfg.Pub.Total.Store(int64(s.total))
	}()
	for s.permits.Len() > 0 {
		if s.total >= s.cfg.MaxConnsTotal {
			if !s.evict {
				if e := s.lruIdleRoute(); e != nil {
					s.evict = true
					s.evictions++
					ctx.Send(e.h.PID, &EvictIdleRequest{})
				}
			}
			return
		}
		_, pid, _ := s.permits.Pop()
		// Publish before granting: the route may run, dial, serve and release
		// before this goroutine gets to the deferred store, and a stale count
		// makes it close a good connection "for another route" (supWantsRoom).
		s.cfg.Pub.PermitWaiters.Store(int64(s.permits.Len()))
		e := s.byID[pid.Id]
		if e == nil {
			continue
		}
		e.held++
		s.total++
		ctx.Send(pid, &PermitGranted{})
	}
}

// lruIdleRoute finds the route whose oldest idle connection is the least
// recently used of all, from the routes' published counters. It costs one atomic
// load per route and runs only when the total limit is reached.
func (s *Supervisor) lruIdleRoute() *routeEntry {
	var best *routeEntry
	var bestSince int64
	for _, e := range s.byID {
		since := e.h.Pub.LRUIdleSince.Load()
		if since != 0 && (best == nil || since < bestSince) {
			best, bestSince = e, since
		}
	}
	return best
}

func (s *Supervisor) onConnClosed(ctx actor.Context, m *ConnClosed) {
	s.closedBy[m.Reason]++
	switch m.Reason {
	case ReasonIdleExpired, ReasonLifetime, ReasonKeepAlive:
		s.expired++
	case ReasonDialFailed:
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
	s.total--
	if e.held < 0 || s.total < 0 {
		panic("actors: internal error: connection place freed twice")
	}
	s.grantPermits(ctx)
}

func (s *Supervisor) onTerminated(ctx actor.Context, m *actor.Terminated) {
	e := s.byID[m.Who.Id]
	if e == nil {
		return
	}
	delete(s.byID, m.Who.Id)
	if s.routes[e.h.Key] == e {
		delete(s.routes, e.h.Key)
	}
	e.h.Pub.Stopped.Store(true)
	s.total -= e.held
	e.held = 0
	s.grantPermits(ctx)
}

func (s *Supervisor) onExpiryTick(ctx actor.Context) {
	msg := &ExpireIdle{Now: s.cfg.Route.Now()}
	for _, e := range s.byID {
		if e.h.Pub.Idle.Load() > 0 {
			ctx.Send(e.h.PID, msg)
		}
	}
}

func (s *Supervisor) onAdmitRequest(m *AdmitRequest) {
	if s.closing {
		m.Reply <- ErrRouteClosed
		return
	}
	s.admits.Push(m.ID, m)
	s.cfg.Pub.AdmitWaiters.Add(1)
	s.admit()
}

// admit admits queued callers in arrival order while the admission counter has room.
func (s *Supervisor) admit() {
	max := int64(s.cfg.MaxConcurrentRequests)
	for s.admits.Len() > 0 && s.cfg.Pub.tryTake(max) {
		_, a, _ := s.admits.Pop()
		s.cfg.Pub.AdmitWaiters.Add(-1)
		a.Reply <- nil
	}
}

func (s *Supervisor) onAdmitCancel(m *AdmitCancel) {
	if a, ok := s.admits.Remove(m.ID); ok {
		s.cfg.Pub.AdmitWaiters.Add(-1)
		a.Reply <- m.Err
	}
}

func (s *Supervisor) statsResponse() StatsResponse {
	hs := make([]*RouteHandle, 0, len(s.byID))
	for _, e := range s.byID {
		hs = append(hs, e.h)
	}
	return StatsResponse{Routes: hs, Total: s.total, MaxTotal: s.cfg.MaxConnsTotal,
		PermitWaiters: s.permits.Len(), AdmitWaiters: s.admits.Len(),
		Evictions: s.closedBy[ReasonEvicted], Expired: s.expired, DialFailures: s.dialFailures,
		RoutesStarted: len(s.byID)}
}
