package actors

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptrace"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
)

// wantConns asks the supervisor for permits while waiters outnumber the
// connections being dialed, within MaxConnsPerRoute. Fresh waiters that find the
// route full of idle, re-used connections make room by closing the oldest one.
// A route above its fleet share (RoomWanted Shed) asks for none: it would
// close the new connection as soon as it was dialed.
func (r *Route) wantConns(ctx actor.Context) {
	if r.closed || r.shed || r.eps.awaiting() {
		return
	}
	if r.dialsH2() {
		r.wantH2Conns(ctx)
		return
	}
	maxDials := r.cfg.MaxDialsPerRoute
	if maxDials <= 0 {
		maxDials = r.cfg.MaxConnsPerRoute
	}
	maxDials = r.breaker.maxDials(maxDials)
	for {
		need := r.waiters.Len() - r.dialing - r.permitsPending
		if need <= 0 {
			return
		}
		if r.dialing+r.permitsPending >= maxDials {
			return // waiters beyond it wait for a dial or a release
		}
		if len(r.conns)+r.permitsPending >= r.cfg.MaxConnsPerRoute {
			if r.freshWaiters > 0 && len(r.idle) > 0 {
				r.closeConn(ctx, r.idle[0], route.ReasonEvicted)
				continue
			}
			return
		}
		r.permitsPending++
		ctx.Send(r.sup, r.permitReq)
	}
}

// withdrawPermits asks the supervisor to take back the permits the route
// asked for beyond what its waiters need: they gave up while it waited.
func (r *Route) withdrawPermits(ctx actor.Context) {
	excess := r.permitsPending - r.withdrawing - max(0, r.waiters.Len()-r.dialing)
	if r.closed || excess <= 0 {
		return
	}
	r.withdrawing += excess
	ctx.Send(r.sup, &PermitWithdrawRequest{From: r.self, N: excess})
}

// onPermit spawns a connection actor for a permit, unless nobody needs it any
// more or the route was told to shed since it asked.
func (r *Route) onPermit(ctx actor.Context) {
	r.permitsPending--
	if r.closed || r.shed || r.waiters.Len() <= r.dialing || len(r.conns) >= r.cfg.MaxConnsPerRoute {
		ctx.Send(r.sup, &PermitReturned{From: r.self})
		return
	}
	r.nextID++
	id := r.nextID
	to, ep := r.dialTo()
	pid := r.spares.take()
	if pid != nil {
		ctx.Send(pid, &conn.DialRequest{ID: id, Life: r.dialLife(), To: to})
	} else {
		pid = ctx.Spawn(conn.DialProps(r.key, r.cfg.Conn, conn.DialRequest{ID: id, Life: r.dialLife(), To: to}))
	}
	cs := &connState{connRef: connRef{id: id, pid: pid}, phase: phaseDialing, created: r.clock(), idleIdx: -1, proto: http1Conn{},
		lifetime: jitteredLifetime(r.cfg.MaxLifetime, r.rand()), ep: ep}
	r.conns[id] = cs
	r.byPID[pid.Id] = cs
	r.dialing++
}

func (r *Route) onDialed(ctx actor.Context, m *conn.Dialed) {
	cs := r.conns[m.ID]
	if cs == nil || cs.phase != phaseDialing {
		return
	}
	if m.Err != nil {
		r.dialFailed(ctx, cs, m)
		return
	}
	r.dialed(cs) // free: available decides where it goes
	if r.breaker.dialSucceeded() || r.dialsFailing {
		r.dialsFailing = false
		r.cfg.Logger.Info("connactor: dials to route succeed again", "route", r.name)
	}
	r.endpointDialed(cs, m)
	cs.dial = DialTiming{Took: m.Took, Connect: m.Connect, TLS: m.TLS}
	cs.netConn, cs.tlsState, cs.inbox = m.NetConn, m.TLSState, m.Inbox
	r.proto = protoH1
	if m.H2 != nil { // the protocol is decided here, once
		h := &http2Conn{cs: cs, conn: m.H2}
		cs.proto, r.h2[cs.id], r.proto, cs.connRef.h2 = h, h, protoH2, m.H2
		r.learnH2Limit(h)
	}
	r.opened++
	r.tel.ConnOpened(r.name, cs.id, cs.peer, m.Took)
	r.available(ctx, cs, r.clock())
}

// dialFailed closes a failed dial. The oldest waiter still waiting learns
// why; the others get dials of their own (wantConns after this message),
// unless the failures open the fail-fast breaker, which fails them all (each
// counted in FailedFast). A dial that started before the breaker last opened
// counts toward nothing (see breaker.dialFailed); while the breaker is not
// closed it fails nobody either: the waiters wait for the probe.
func (r *Route) dialFailed(ctx actor.Context, cs *connState, m *conn.Dialed) {
	r.dialFailures++
	if r.endpointDialFailed(ctx, cs, m) { // another address remains: the waiters get a dial there
		r.tel.DialFailed(r.name, dialPeer(m), m.Err, m.Took)
		r.closeConn(ctx, cs, route.ReasonDialFailed)
		return
	}
	if !r.dialsFailing {
		r.dialsFailing = true
		r.cfg.Logger.Warn("connactor: dials to route failing", "route", r.name, "err", m.Err)
	}
	r.tel.DialFailed(r.name, dialPeer(m), m.Err, m.Took)
	r.closeConn(ctx, cs, route.ReasonDialFailed) // counts the dial out of r.dialing
	now := r.clock()
	switch r.breaker.dialFailed(m.ID, r.nextID, now, r.rand()) {
	case dialOpened:
		r.cfg.Logger.Warn("connactor: route fails fast: its dials keep failing", "route", r.name,
			"consecutive_failures", r.breaker.failures, "until", r.breaker.until.Sub(now).Round(time.Millisecond), "err", m.Err)
		unavailable := fmt.Errorf("%w (last: %w)", ErrRouteUnavailable, m.Err)
		for {
			_, w, ok := r.waiters.Pop()
			if !ok {
				return
			}
			r.dequeued(w)
			if w.req.Ticket.Reject(unavailable) {
				r.breaker.rejected++
				r.tel.LeaseRejected("route_unavailable")
			}
		}
	case dialIgnored:
		if r.breaker.state != breakerClosed {
			return
		}
	}
	for {
		_, w, ok := r.waiters.Pop()
		if !ok {
			break
		}
		r.dequeued(w)
		if w.req.Ticket.Reject(m.Err) {
			break
		}
	}
}

func (r *Route) onIdleBroken(ctx actor.Context, m *conn.IdleBroken) {
	cs := r.conns[m.ID]
	if cs != nil && cs.phase == phaseOffered {
		r.takeBack() // idle again if it comes back, leased if a caller took it
	}
	if cs == nil || cs.phase != phaseIdle {
		return // leased meanwhile: the exchange finds out and fails as stale
	}
	now := r.clock()
	r.learner.serverClosed(now.Sub(cs.idleSince), now)
	r.closeConn(ctx, cs, route.ReasonServerClosed)
}

// rand draws uniformly from [0, 1).
func (r *Route) rand() float64 {
	if r.cfg.Rand != nil {
		return r.cfg.Rand()
	}
	return rand.Float64()
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

// dialLife is the context of the next dial: the client's lifetime, carrying the
// httptrace hooks of the waiter the dial is for (the oldest one that no dial in
// progress covers yet), so that ConnectStart, TLSHandshakeStart and friends reach
// the request that caused the dial, as in net/http.
func (r *Route) dialLife() context.Context {
	i := 0
	_, w, ok := r.waiters.Find(func(waiter) bool { i++; return i > r.dialing })
	if !ok || w.req.Trace == nil {
		return r.cfg.Life
	}
	return httptrace.WithClientTrace(r.cfg.Life, w.req.Trace)
}
