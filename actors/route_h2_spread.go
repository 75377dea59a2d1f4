package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// HTTP/2 over a host's addresses. A route to a host name keeps one HTTP/2
// connection per address that is up, opened as load needs them, and sends
// each stream to the connection with the fewest streams in flight (least
// outstanding; among as few, the most recently used: h2WithRoom), so that
// the streams of a host spread over its addresses instead of riding on the
// one connection the peer's stream limit would otherwise leave it with.
//
// The rule, written once (spreadWanted): the route dials another HTTP/2
// connection, with nobody waiting, when
//  1. a stream was just leased (a stream is wanted),
//  2. another stream was in flight on the route when it was (load: a single
//     sequential caller never opens a second connection),
//  3. an address that is up (in the resolved set, not ejected) has no
//     connection of the route that takes new streams (none open, or only
//     ones that drain or retire: MaxLifetime and draining keep their
//     meaning), and
//  4. no dial or permit is under way (one HTTP/2 dial at a time), and the
//     route is below MaxConnsPerRoute (the supervisor's permit enforces the
//     other limits).
// The dial goes where every dial goes (endpointSet.pick: the fewest open,
// so an address without a connection). Callers who wait are the other rule's
// (wantH2Conns): they get a dial when every usable connection is full.

// h2Spread is the route's state for the rule: route state, touched only in
// its Receive.
type h2Spread struct {
	// leased is set when a stream is leased while another is in flight
	// (grant), and cleared when the route has looked at it (wantH2Spread).
	leased bool
	// permit is set while the route's one pending permit is for a spread
	// dial, which no waiter accounts for (onPermit, withdrawPermits).
	permit bool
}

// streamGranted notes a stream leased on cs (grant), for the rule's first
// two conditions: cs's streams now count it.
func (r *Route) streamGranted(cs *connState) {
	// Without endpoints the rule never dials: no sum over the route's
	// connections on each stream then.
	if cs.connRef.h2 != nil && r.eps.on && !r.spread.leased && r.streams() >= 2 {
		r.spread.leased = true
	}
}

// wantH2Spread asks for a permit for a spread dial when spreadWanted.
func (r *Route) wantH2Spread(ctx actor.Context) {
	if !r.spread.leased || !r.spreadWanted(r.clock()) {
		return
	}
	r.spread.permit = true
	r.permitsPending++
	ctx.Send(r.sup, r.permitReq)
}

// spreadWanted is the rule (see the top of this file).
func (r *Route) spreadWanted(now time.Time) bool {
	leased := r.spread.leased
	r.spread.leased = false
	if !leased || !r.eps.on || r.eps.set.empty() || r.dialing+r.permitsPending > 0 ||
		len(r.conns) >= r.cfg.MaxConnsPerRoute {
		return false
	}
	cut := r.eps.set.cutoff(now)
	for _, e := range r.eps.set.live() {
		if !e.held(cut, now) && !r.takesStreams(e, now) {
			return true
		}
	}
	return false
}

// takesStreams reports whether one of the route's HTTP/2 connections to e
// takes new streams: it neither drains nor retires.
func (r *Route) takesStreams(e *endpoint, now time.Time) bool {
	for _, h := range r.h2 {
		if h.cs.ep == e && !h.drains(h.conn.Streams()) && r.retireReason(h.cs, false, now) == "" {
			return true
		}
	}
	return false
}

// spreadPermit takes the permit the route asked for a spread dial, if the
// one that arrived (onPermit) was it: the dial goes though nobody waits.
func (r *Route) spreadPermit() bool {
	p := r.spread.permit
	r.spread.permit = false
	return p
}

// endpointStreams returns the HTTP/2 streams in flight to e.
func (r *Route) endpointStreams(e *endpoint) int {
	n := 0
	for _, h := range r.h2 {
		if h.cs.ep == e {
			n += h.n
		}
	}
	return n
}
