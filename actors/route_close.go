package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
)

// Closing a route's connections: the one transition that ends a
// connection's record (closeConn), and the events that call it.

func (r *Route) onIdleBroken(ctx actor.Context, m *conn.IdleBroken) {
	cs := r.conns[m.ID]
	if cs != nil && cs.phase == phaseOffered {
		r.takeBack() // idle again if it comes back, leased if a caller took it
	}
	if cs != nil && cs.phase == phaseLeased && cs.proto.exclusive() {
		// Leased meanwhile: its exchange, if any, finds out and fails as
		// stale; given back untouched, it must not go idle again.
		cs.serverClosed = true
		return
	}
	if cs == nil || cs.phase != phaseIdle {
		return
	}
	now := r.clock()
	r.learner.serverClosed(now.Sub(cs.idleSince), now)
	r.closeConn(ctx, cs, route.ReasonServerClosed)
}

// onEvictIdle closes the least recently used idle connection, if any, and
// answers after publishing, so that the supervisor never reads counters older
// than its answer.
func (r *Route) onEvictIdle(ctx actor.Context) {
	r.takeBack() // the least recently used idle connection may be on offer
	evicted := false
	if len(r.idle) > 0 {
		r.closeConn(ctx, r.idle[0], route.ReasonEvicted)
		evicted = true
	}
	r.wantConns(ctx)
	r.publish()
	ctx.Send(r.sup, &IdleEvicted{From: r.self, Evicted: evicted})
}

// closeConn closes a connection's socket now (CloseNow does not block),
// recycles or stops its actor (see spareConns) and tells the supervisor the
// place is free: the transition that ends the route's record of it. A
// connection on offer is taken back first (takeBack): if a caller took it,
// the caller's exchange finds the socket closed.
func (r *Route) closeConn(ctx actor.Context, cs *connState, reason route.CloseReason) {
	switch {
	case cs.phase == phaseClosed:
		panic("actors: internal error: connection closed twice")
	case cs.phase == phaseOffered:
		r.takeBack()
	case cs.phase == phaseDialing:
		r.dialing--
		if r.dialing < 0 {
			panic("actors: internal error: negative dial count")
		}
	}
	if cs.idleIdx >= 0 {
		r.removeIdle(cs)
	}
	spare := r.keepsSpare(cs, reason)
	cs.phase = phaseClosed
	// The socket closes now (nil while dialing: nothing to close).
	conn.CloseNow(cs.netConn)
	if !r.closed { // when the route stops, protoactor stops its children itself
		// An actor that failed (route.ReasonError: its Terminated, or a Released
		// that says so) is stopped, never recycled.
		if spare {
			r.spares.add(cs.pid)
			// The inline mailbox may run the recycle here, and it waits
			// for a running idle watcher: only for its peek to return,
			// which it does at once on the socket aborted above (as a
			// Stop's Stopping does).
			ctx.Send(cs.pid, recycle)
		} else {
			ctx.Stop(cs.pid)
		}
	}
	r.endpointClosed(cs)
	delete(r.conns, cs.id)
	delete(r.byPID, cs.pid.Id)
	delete(r.h2, cs.id)
	if len(r.conns) == 0 {
		r.spares.emptied = r.clock()
	}
	// Closed and ClosedBy count connections that were open; failed dials are
	// DialFailures.
	if reason != route.ReasonDialFailed {
		r.closedN++
		r.closedBy[string(reason)]++
		now := r.clock()
		age := now.Sub(cs.created)
		r.recentCloses.add(route.ClosedConn{At: now, Reason: reason, Age: age, Served: cs.served})
		r.tel.ConnClosed(r.name, cs.id, cs.peer, string(reason), age, cs.served)
	}
	ctx.Send(r.sup, &ConnClosed{From: r.self, Reason: reason})
}

// onTerminated handles a connection actor that stopped on its own (a panic),
// or that stopped itself instead of being recycled (RecycleRequest).
func (r *Route) onTerminated(ctx actor.Context, m *actor.Terminated) {
	if cs := r.byPID[m.Who.Id]; cs != nil {
		r.closeConn(ctx, cs, route.ReasonError) // never recycled: it stopped
		return
	}
	r.spares.gone(m.Who)
}
