package actors

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptrace"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
)

// Growing a route: permits asked of the supervisor for the callers who wait,
// and the dials they pay for (a connection actor spawned, or a spare one
// sent a DialRequest), with where each dial goes and what its failure does.

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
		need := r.dialsRoom(r.waiters.Len() - r.dialing - r.permitsPending)
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
	if r.spread.permit {
		excess-- // a spread dial's: no waiter needs it
	}
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
	spread := r.spreadPermit() // a spread dial's (route_h2_spread.go): nobody waits for it
	if r.closed || r.shed || (r.waiters.Len() <= r.dialing && !spread) || len(r.conns) >= r.cfg.MaxConnsPerRoute {
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
	cs := &connState{connRef: connRef{id: id, pid: pid}, phase: phaseDialing, created: r.clock(), idleIdx: -1, offerIdx: -1, proto: http1Conn{},
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
	r.dialProto = protoH1
	if m.H2 != nil { // the protocol is decided here, once
		h := &http2Conn{cs: cs, conn: m.H2}
		cs.proto, r.h2[cs.id], r.dialProto, cs.connRef.h2 = h, h, protoH2, m.H2
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

// rand draws uniformly from [0, 1).
func (r *Route) rand() float64 {
	if r.cfg.Rand != nil {
		return r.cfg.Rand()
	}
	return rand.Float64()
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
