package actors

import (
	"crypto/tls"
	"net"
	"net/netip"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn/h2"
	"github.com/connactor/connactor/internal/mailbox"
)

// A connection's state on its route, and the transitions that change it.
// The transitions below (dialed, toIdle, toOffered, toLeased, toFree, and
// closeConn, which ends the record) are the only writers of a connection's
// phase, its idle time, its lease time, its place on the idle list and the
// route's lease counters:
//
//	dialing --dialed--> free --toIdle--> idle --toOffered--> offered
//	                     |                 |                    |
//	                     +----toLeased-----+-------toLeased-----+ (granted, or
//	                                                              taken from the outbox)
//	leased --Released--> to a waiter (toLeased), idle (toIdle), or closeConn
//	offered --takeBack--> idle, or leased (a caller took it)
//	offered, leased --toFree--> free (an offer given back unused)
//
// free is a connection's state inside one message only: dialed, or an offer
// given back, and about to be placed (granted, idle, or closed).

type connPhase uint8

const (
	phaseDialing connPhase = iota
	phaseFree              // dialed, or an offer given back; placed before the message ends
	phaseIdle              // on the idle list (route.idle)
	phaseLeased            // leased (HTTP/1.1), or carrying streams (HTTP/2)
	phaseOffered           // HTTP/1.1: in the outbox, or taken by a caller the route has not heard from
	phaseClosed            // closed (closeConn): no longer the route's
)

// connState is the route's record of one connection actor.
type connState struct {
	// connRef is what a lease holder needs of the connection: its ID and
	// actor from the start, its inbox, socket and TLS state from its dial on,
	// never changed after, so that an offer carries a pointer to it.
	connRef
	proto    connProto      // HTTP/1.1 or HTTP/2 (route_proto.go)
	ep       *endpoint      // its address in the route's endpoint set (nil: none)
	peer     netip.AddrPort // the address it reached (Dialed.Peer)
	created  time.Time
	lifetime time.Duration // MaxLifetime, jittered (0 = none)
	served   int
	// serverClosed says its idle watch reported the socket closed (or
	// unusable) after a caller was leased it: it retires as it comes back
	// (retireReason), given back untouched or released.
	serverClosed bool
	// idleUntil is the server's Keep-Alive cap, zero when none: set by
	// each release.
	idleUntil time.Time
	// dial is reported with the connection's first lease only (toLeased
	// clears it).
	dial DialTiming

	// Written by the transitions only.
	phase connPhase
	// idleSince is when it last became idle (toIdle); zero until then. Read
	// while it is idle or offered: how long an offer or a lease finds it
	// idle, and which idle connection is the least recently used.
	idleSince time.Time
	leasedAt  time.Time     // when the current lease began (Stats: the oldest unreleased lease)
	lastIdle  time.Duration // how long it was idle before the current lease
	idleIdx   int           // its place in Route.idle while idle; -1 otherwise
	offerIdx  int           // its place in outbox.offered while offered; -1 otherwise
}

// dialed makes a connection that was dialing free: its dial succeeded.
func (r *Route) dialed(cs *connState) {
	r.dialing--
	cs.phase = phaseFree
}

// toIdle puts cs, free or offered, on the idle list as idle since since, in
// its place by idle time (least recently used first): a connection that
// goes idle now goes last, and an offer taken back where it was.
func (r *Route) toIdle(cs *connState, since time.Time) {
	cs.phase = phaseIdle
	cs.idleSince = since
	i := len(r.idle)
	for i > 0 && r.idle[i-1].idleSince.After(since) {
		i--
	}
	r.idle = append(r.idle, nil)
	copy(r.idle[i+1:], r.idle[i:])
	r.idle[i] = cs
	for j := i; j < len(r.idle); j++ {
		r.idle[j].idleIdx = j
	}
}

// toOffered takes cs, idle, off the idle list and on offer (outbox.put).
func (r *Route) toOffered(cs *connState) {
	r.removeIdle(cs)
	cs.phase = phaseOffered
}

// toLeased leases cs from now: granted to a waiter (free, idle, or an
// HTTP/2 connection given one more stream), or an offer a caller took
// (taken, counted in Stats.Offered). It counts the lease and returns how
// long cs had been idle (idleFor).
func (r *Route) toLeased(cs *connState, now time.Time, taken bool) time.Duration {
	idleFor := cs.idleFor(now)
	if cs.idleIdx >= 0 {
		r.removeIdle(cs)
	}
	cs.phase = phaseLeased
	cs.leasedAt = now
	cs.lastIdle = idleFor
	cs.dial = DialTiming{}
	r.leases++
	if cs.served > 0 {
		r.reuses++
	}
	if taken {
		r.offeredN++
	}
	return idleFor
}

// toFree makes a lease a caller gave back unused (LeaseCancelled,
// OfferDeclined) free again, idle since it was before the lease: an offer
// (offered), or an HTTP/1.1 connection granted to it. An offer's lease the
// route had counted when it found the offer taken (takeBack) is uncounted:
// no lease; a granted one stays counted (Stats.Leases counts the grants).
// cs may be nil for an offer: its connection closed after a take-back
// counted it. It reports whether cs is free (false: it was neither on
// offer nor leased).
func (r *Route) toFree(cs *connState, offered bool) bool {
	if offered && (cs == nil || cs.phase == phaseLeased) {
		r.leases--
		r.reuses--
		r.offeredN--
	}
	switch {
	case cs == nil:
		return false
	case cs.phase == phaseOffered:
		r.out.remove(cs)
	case cs.phase != phaseLeased:
		return false
	}
	cs.phase = phaseFree
	return true
}

// idleFor is how long cs has been idle at now: since it last became idle
// while it is idle, on offer, or an offer given back (free); 0 when it is
// leased, or new.
func (cs *connState) idleFor(now time.Time) time.Duration {
	if cs.phase == phaseLeased || cs.idleSince.IsZero() {
		return 0
	}
	return now.Sub(cs.idleSince)
}

// streams is the HTTP/2 streams cs carries (0 for HTTP/1.1).
func (cs *connState) streams() int { return cs.proto.streams() }

// removeIdle takes cs off the idle list (for a transition).
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

// connRef is what a lease holder needs of a connection: part of the route's
// record of it (embedded in connState), written once when it is dialed and
// never changed afterwards, so that offers carry a pointer to it.
type connRef struct {
	id       uint64
	pid      *actor.PID
	inbox    *mailbox.Mailbox // the connection actor's (conn.Dialed.Inbox)
	netConn  net.Conn
	tlsState *tls.ConnectionState
	h2       *h2.Conn // an HTTP/2 connection's engine (conn.Dialed.H2); nil for HTTP/1.1
}

// lease builds every Lease: terms (Reused, IdleTime, Waited, QueuePos, Dial,
// Offered) with the connection's part filled in. A granted lease
// (Route.grant) and an offer taken (routeHandle.take) are built here.
func (c *connRef) lease(terms Lease) Lease {
	terms.ConnID, terms.Conn, terms.Inbox = c.id, c.pid, c.inbox
	terms.NetConn, terms.TLSState, terms.H2 = c.netConn, c.tlsState, c.h2
	return terms
}
