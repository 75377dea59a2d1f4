package actors

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/actors/codel"
	"github.com/connactor/connactor/actors/limit"
)

// Overload control on a route: a limit on its requests in flight (HTTP/1.1
// leases plus HTTP/2 streams) that adapts to the latency it measures
// (actors/limit), and the shedding of a standing queue (actors/codel). The
// packages hold the rules; the route feeds them inside its Receive, with its
// own clock and the times its callers measured (Released).
//
// The limit holds everywhere a request could start: a caller served at once
// (leaseNow), a connection or stream that comes free and goes to a waiter
// (available, availableH2), the outbox (refill), and the dials asked for the
// callers who wait (wantConns). A caller that would put the route over it
// waits in the FIFO, and is served, in order, when a request ends
// (serveHeld).

// AdaptiveLimit configures a route's adaptive limit (PoolConfig.Adaptive):
// the limit on its requests in flight lies between Min and the route's fixed
// limit, and starts at Initial (0: the defaults of actors/limit).
type AdaptiveLimit struct {
	Min, Initial int
}

// h2StreamsAssumed is the streams per HTTP/2 connection the fixed limit
// counts before the server has announced its own: net/http's default.
const h2StreamsAssumed = 100

// h2StreamsMax bounds the adaptive limit of a route that may speak HTTP/2:
// MaxConnsPerRoute connections of at most this many streams each.
const h2StreamsMax = 1000

// shedTickMax is the longest time between two looks at a standing queue
// while callers wait (QueueTarget): a caller is refused at most this long
// after it is due.
const shedTickMax = 50 * time.Millisecond

// overload is a route's overload control: route state, touched only in its
// Receive.
type overload struct {
	lim    *limit.Limit // nil without Adaptive
	queue  *codel.Queue // nil without QueueTarget
	shedN  uint64       // callers refused with ErrOverloaded
	ticker *shedTicker  // while callers wait, with a queue target
	armed  bool         // the ticker will send shedTicked
}

// newOverload makes the route's overload control from cfg (PoolConfig has
// validated it).
func newOverload(cfg *RouteConfig, h2 bool) overload {
	var o overload
	if a := cfg.Adaptive; a != nil {
		max := cfg.MaxConnsPerRoute
		if h2 {
			max *= h2StreamsMax
		}
		o.lim, _ = limit.New(limit.Config{Max: max, Min: min(a.Min, max), Initial: min(a.Initial, max)})
	}
	if cfg.QueueTarget > 0 {
		o.queue, _ = codel.New(cfg.QueueTarget, 0)
	}
	return o
}

// fixedLimit is the route's limit without Adaptive: MaxConnsPerRoute
// connections, each carrying one request, or, on HTTP/2, the streams its
// server allows (the assumed 100 until it has said).
func (r *Route) fixedLimit() int { return r.cfg.MaxConnsPerRoute * r.perConn() }

// perConn is the requests one connection of the route carries at once: 1 on
// HTTP/1.1, the streams its server allows on HTTP/2 (the assumed 100 until
// it has said).
func (r *Route) perConn() int {
	if r.dialProto != protoH2 {
		return 1
	}
	if r.h2Limit > 0 {
		return r.h2Limit
	}
	return h2StreamsAssumed
}

// limitNow is the route's limit on its requests in flight: the smallest of
// those that apply (limitHeldBy).
func (r *Route) limitNow() int {
	n, _ := r.limitHeldBy()
	return n
}

// limitHeldBy is the route's limit on its requests in flight and what sets
// it: the smallest of MaxConnsPerRoute's (the fixed limit, or the streams
// its server allows), the adaptive limit, MaxConnsPerHost's and the fleet
// share's (the connections they let the route hold, each carrying what one
// connection carries). The last two are the most the route could hold: the
// supervisor's permits enforce them, and what other routes of the host hold
// lowers the host's further (the supervisor names that: LongWaitNoticed).
// The fleet share counts once the keeper has told one. Ties name the
// fixed limit first, then the adaptive one.
func (r *Route) limitHeldBy() (int, waitCause) {
	n, by := r.fixedLimit(), waitsForRouteLimit
	if r.dialProto == protoH2 {
		by = waitsForStream
	}
	if r.ov.lim != nil && r.ov.lim.Limit() < n {
		n, by = r.ov.lim.Limit(), waitsForLimit
	}
	if c := r.hostCap; c > 0 && c*r.perConn() < n {
		n, by = c*r.perConn(), waitsForHost
	}
	if r.fleetBudget > 0 {
		if s := r.fleetShare * r.perConn(); s < n {
			n, by = s, waitsForShare
		}
	}
	return n, by
}

// inFlight is the route's requests in flight: its HTTP/1.1 connections
// leased or on offer (an offer may have been taken: the limit counts it),
// and the streams of its HTTP/2 connections.
func (r *Route) inFlight() int {
	n := len(r.conns) - len(r.idle) - r.dialing
	for _, h := range r.h2 {
		if h.cs.phase != phaseIdle {
			n-- // counted by its streams
		}
		n += h.n
	}
	return n
}

// noLoad is the no-load latency the adaptive limit measured (0 without one).
func (r *Route) noLoad() time.Duration {
	if r.ov.lim == nil {
		return 0
	}
	return r.ov.lim.NoLoad()
}

// hasRoom reports whether one more request may start on the route. Without
// Adaptive it always may: the connections and streams are the limit.
func (r *Route) hasRoom() bool {
	return r.ov.lim == nil || r.inFlight() < r.limitNow()
}

// hasRoomFor reports whether cs, an HTTP/1.1 connection that just came free
// (released, dialed, or given back) and still counted in flight by
// inFlight, may serve one more request: it carries none now.
func (r *Route) hasRoomFor(cs *connState) bool {
	if r.ov.lim == nil {
		return true
	}
	return r.inFlight()-r.countedInFlight(cs) < r.limitNow()
}

// countedInFlight is 1 when inFlight counts cs itself (an HTTP/1.1
// connection neither idle nor dialing), else 0.
func (r *Route) countedInFlight(cs *connState) int {
	if cs.proto.exclusive() && cs.phase != phaseIdle && cs.phase != phaseDialing {
		return 1
	}
	return 0
}

// heldBy says what holds the route's callers when one of the limits below
// the fixed one does (limitHeldBy): every request it allows is in flight.
// Otherwise waitsForConnection: the connections and streams are the limit,
// or the route has room.
func (r *Route) heldBy() waitCause {
	n, by := r.limitHeldBy()
	if n >= r.fixedLimit() || r.inFlight() < n {
		return waitsForConnection
	}
	return by
}

// dialsRoom caps need, the connections the waiters would have dialed, to
// what the limit lets start: a waiter held by the limit needs no
// connection, and an idle one serves the next that may start.
func (r *Route) dialsRoom(need int) int {
	if r.ov.lim == nil {
		return need
	}
	return min(need, r.limitNow()-r.inFlight()-len(r.idle)-r.dialing-r.permitsPending)
}

// serveHeld serves the callers the limit held while it has room again (a
// request ended, or the limit rose): from idle connections, most recently
// used first, and free streams. Runs after every message, before the route
// dials for what is left.
func (r *Route) serveHeld(ctx actor.Context) {
	if r.ov.lim == nil || r.waiters.Len() == 0 || r.closed || !r.hasRoom() {
		return
	}
	now := r.clock()
	for _, h := range r.h2 {
		if r.waiters.Len() == 0 || !r.hasRoom() {
			return
		}
		if r.h2Room(h, now) > 0 && r.waiterFor(h.cs) {
			r.availableH2(ctx, h, now)
		}
	}
	for i := len(r.idle) - 1; i >= 0 && i < len(r.idle) && r.waiters.Len() > 0 && r.hasRoom(); i-- {
		cs := r.idle[i]
		if !cs.proto.exclusive() || r.closeIfDue(ctx, cs, now) {
			continue
		}
		fresh := cs.served == 0
		for {
			w, q, ok := r.nextWaiter(func(w waiter) bool { return fresh || !w.req.Fresh })
			if !ok || r.grant(w, cs, q) {
				break
			}
		}
	}
}

// exchangeSampled feeds the adaptive limit one exchange's outcome: the
// latency from its write to its response head, or a caller that gave up
// while it was in flight. An exchange that failed before anything was
// measured (a stale connection, a failed write) teaches nothing.
func (r *Route) exchangeSampled(m *Released) {
	if r.ov.lim == nil || m.Written.IsZero() || m.Head.IsZero() {
		return
	}
	n := m.InFlight
	if n <= 0 {
		n = r.inFlight() // taken from the outbox: the route did not count it at its lease
	}
	if m.TimedOut {
		r.ov.lim.OnTimeout(m.Written, m.Head, n)
		return
	}
	r.ov.lim.OnResponse(m.Written, m.Head, n)
}

// shedStanding refuses, oldest first, the callers of a standing queue with
// ErrOverloaded while the rule says so (codel): only once the queue has not
// been empty for its interval, and only those over QueueTarget. None of them
// was leased anything: nothing of theirs was sent. It runs after every
// message, before and after serveHeld, so that the rule sees the queue
// every time it empties.
func (r *Route) shedStanding() {
	q := r.ov.queue
	if q == nil || r.closed {
		return
	}
	now := r.clock()
	for {
		_, w, ok := r.waiters.Peek()
		var oldest time.Time
		if ok {
			oldest = w.at
		}
		if !q.ShouldShed(now, oldest) {
			return
		}
		r.waiters.Pop()
		r.dequeued(w)
		r.ov.shedN++
		r.tel.RequestShed()
		w.req.Ticket.Reject(ErrOverloaded)
	}
}

// armShedTick keeps the ticker armed while callers wait on a route with a
// queue target: a queue nobody leaves is judged all the same. It fires when
// the oldest caller is due to be refused (codel's DueAt), or after
// shedTickMax at most.
func (r *Route) armShedTick(ctx actor.Context) {
	if r.ov.queue == nil || r.ov.armed || r.closed || r.waiters.Len() == 0 {
		return
	}
	d := shedTickMax
	if _, w, ok := r.waiters.Peek(); ok {
		d = min(d, max(r.ov.queue.DueAt(w.at).Sub(r.clock()), time.Millisecond))
	}
	if r.ov.ticker == nil {
		r.ov.ticker = newShedTicker(ctx, r.self, d)
	} else {
		r.ov.ticker.t.Reset(d)
	}
	r.ov.armed = true
}

// onShedTicked handles the ticker: the queue is judged (shedStanding runs
// after every message) and the ticker armed again while callers wait.
func (r *Route) onShedTicked() { r.ov.armed = false }

// stopShedTick stops the ticker for good (the route stops).
func (r *Route) stopShedTick() {
	if t := r.ov.ticker; t != nil {
		t.t.Stop()
		t.target.Store(nil)
		r.ov.ticker = nil
	}
	r.ov.armed = false
}

// shedTicker sends its route shedTicked: a route's own timer, only while
// callers wait and QueueTarget is set.
type shedTicker struct {
	t      *time.Timer
	target atomic.Pointer[actor.PID] // nil once its route stopped
}

func newShedTicker(ctx actor.Context, self *actor.PID, d time.Duration) *shedTicker {
	st, sys := &shedTicker{}, ctx.ActorSystem()
	st.target.Store(self)
	st.t = time.AfterFunc(d, func() {
		if pid := st.target.Load(); pid != nil {
			sys.Root.Send(pid, theShedTick)
		}
	})
	return st
}

// shedTicked is sent by a route's shed ticker to the route itself. No reply.
type shedTicked struct{}

// theShedTick is the one shedTicked sent, never changed.
var theShedTick = &shedTicked{}
