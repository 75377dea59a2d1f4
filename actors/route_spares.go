package actors

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
)

// spareConns are the route's connection actors that hold no socket: when a
// connection closes, its actor is recycled (conn.RecycleRequest) rather than
// stopped, up to maxSpareConns of them, and the next permit sends one a
// conn.DialRequest instead of spawning an actor. A spawn and a stop cost
// about 6 us and 20 allocations (props, PID, registry entry, mailbox,
// Started, Stopping, Stopped, Terminated): most of a dial's cost beyond the
// connect under churn (BenchmarkDial). A spare holds no goroutine, socket or
// buffer, but about 2 KB of heap (conn's BenchmarkSpareActorMemory): the
// spares stop with the route, or once the route has had no connection for
// MaxIdleTime (expireSpares), so a quiet route keeps none.
//
// A route keeps no spare of a connection evicted to make room for another
// route when it has opened no other connection (keepsSpare): a crawler's or
// a webhook sender's routes, each used once and each losing its connection
// to the next route under MaxConnsTotal, would otherwise each keep one for
// MaxIdleTime, 2 KB and a place in protoactor's process registry apiece, for
// a dial that does not come. A route that dials again under churn (evicted
// in turn with other routes, or its connections closed by the server) has
// opened more than one, and keeps its spares.
type spareConns struct {
	pids      []*actor.PID // recycled (Recycled), ready for a DialRequest
	recycling []*actor.PID // sent a RecycleRequest, not answered yet
	emptied   time.Time    // when the route's last connection closed
}

// maxSpareConns bounds the spare connection actors of a route.
const maxSpareConns = 2

// keepsSpare reports whether the actor of cs, closing for reason, becomes a
// spare: only an HTTP/1.1 connection's that connected and did not fail
// (route.ReasonError), within maxSpareConns and the route's connection
// limit, and not when cs was evicted and is the only connection the route
// has opened (see spareConns).
func (r *Route) keepsSpare(cs *connState, reason route.CloseReason) bool {
	return reason != route.ReasonError && cs.phase != phaseDialing && cs.proto.exclusive() &&
		!(reason == route.ReasonEvicted && r.opened <= 1) && r.spares.room(r.cfg.MaxConnsPerRoute)
}

// recycle is the one message, never changed, that recycles a connection actor.
var recycle = &conn.RecycleRequest{}

// room reports whether one more actor may be recycled, within maxSpareConns
// and the route's connection limit.
func (s *spareConns) room(maxConns int) bool {
	return len(s.recycling)+len(s.pids) < min(maxSpareConns, maxConns)
}

// add counts pid, sent a RecycleRequest, among the spares.
func (s *spareConns) add(pid *actor.PID) {
	s.recycling = append(s.recycling, pid)
}

// take returns a spare actor, most recently recycled first, or nil.
func (s *spareConns) take() *actor.PID {
	n := len(s.pids)
	if n == 0 {
		return nil
	}
	pid := s.pids[n-1]
	s.pids[n-1] = nil
	s.pids = s.pids[:n-1]
	return pid
}

// recycled: a connection actor answered a RecycleRequest (Recycled)
// and is spare.
func (s *spareConns) recycled(pid *actor.PID) {
	if drop(&s.recycling, pid) {
		s.pids = append(s.pids, pid)
	}
}

// gone forgets an actor that stopped while spare, or while being recycled
// (it stopped itself instead of answering: see conn.RecycleRequest).
func (s *spareConns) gone(pid *actor.PID) {
	if !drop(&s.pids, pid) {
		drop(&s.recycling, pid)
	}
}

// expireSpares stops the spare actors of a route that has had no connection
// for MaxIdleTime and has no waiter (the rule idle connections follow): they
// serve dials under churn, and a quiet route needs none. Called on an expiry
// tick; the supervisor sends ticks to routes with spares
// (routePublished.Spare).
func (r *Route) expireSpares(ctx actor.Context, now time.Time) {
	s := &r.spares
	if len(s.pids) == 0 || len(r.conns) > 0 || r.waiters.Len() > 0 ||
		r.cfg.MaxIdleTime <= 0 || now.Sub(s.emptied) < r.cfg.MaxIdleTime {
		return
	}
	for i, pid := range s.pids {
		ctx.Stop(pid) // its Terminated finds it in no list (gone)
		s.pids[i] = nil
	}
	s.pids = s.pids[:0]
}

// drop removes pid from *pids and reports whether it was there.
func drop(pids *[]*actor.PID, pid *actor.PID) bool {
	for i, p := range *pids {
		if p.Id == pid.Id {
			*pids = slices.Delete(*pids, i, i+1)
			return true
		}
	}
	return false
}
