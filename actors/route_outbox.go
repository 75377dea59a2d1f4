package actors

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn/h2"
	"github.com/connactor/connactor/internal/mailbox"
	"github.com/connactor/connactor/route"
)

// The route's outbox: the one way state leaves a route's Receive without a
// reply. A route that has idle HTTP/1.1 connections and nobody waiting in
// its FIFO offers some of them in a buffered channel, and a caller's lease takes one with a
// non-blocking receive, without a message to the route: an uncontended
// request then costs the route one message (its Released), not two. The
// rules:
//
//  1. Only the route sends to its outbox, inside its Receive, and only while
//     no caller waits in its FIFO (refill): a caller that queued is never
//     overtaken by one that takes an offer after it queued.
//  2. A caller takes an offer with a non-blocking receive (routeHandle.take).
//     Taking an offer is receiving a message from the route: the connection
//     is the caller's, exactly as if the route had granted it, until its
//     Released (or, for an offer past its connection's due time, its
//     OfferDeclined). Callers that must not take a re-used connection
//     (a fresh replay), or that avoid one, send a LeaseRequest instead.
//  3. Everything else stays the route's: its FIFO, the limits (an offered
//     connection is open and counted), LRU eviction, expiry and statistics.
//  4. The route takes offers back by receiving from its own outbox
//     (takeBack): what it gets back was idle; what it cannot get back was
//     taken, and is leased until its Released. It does so before a caller
//     queues (so that no caller queues while an offer waits), and before it
//     closes, evicts or expires idle connections, or stops.
//  5. Releases stay messages.
//
// HTTP/2 streams are never on offer: a stream lease is a LeaseRequest. The
// message it saves cost the route 0.5-2 us of CPU on requests that cost
// 25-140 us, within the end-to-end benchmarks' noise, and a stream taken
// without a message was missing from Stats until the route heard of it.
//
// At most offerDepth HTTP/1.1 connections are offered, the most recently
// used idle ones: if every idle connection were offered, callers would take
// the oldest offer first and use every connection in turn, none would stay
// idle long enough to expire, and a pool grown by a burst would never
// shrink. With a few offers, refilled from the most recently used end of the
// idle list, only those few rotate; the others stay on the idle list in LRU
// order and expire, or are evicted, as before.

// offerDepth is the outbox's capacity: how many idle connections a route
// offers at most (fewer when MaxConnsPerRoute is lower). Every Released runs
// the route and refills the outbox; a lease that finds it empty meanwhile
// sends a LeaseRequest, which the idle list serves as fast, only with a
// message more.
const offerDepth = 4

// outboxDepth is the capacity of route k's outbox: offerDepth, or fewer for
// a route that may hold fewer connections.
func outboxDepth(k route.Key, cfg *RouteConfig) int {
	return max(1, min(offerDepth, cfg.MaxConnsPerRoute))
}

// offer is an idle HTTP/1.1 connection in a route's outbox: a value, never
// changed once sent.
type offer struct {
	conn      *connRef
	idleSince time.Time
	// until is when the route retires the connection if it is still idle
	// then (MaxIdleTime, the server's Keep-Alive timeout, the learned idle
	// timeout, MaxLifetime; zero: never). A caller that takes the offer at
	// or after it declines it (OfferDeclined): the route closes it.
	until time.Time
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

// lease is a Lease of the connection, reused or not, idle for idle before
// it: what a granted lease and an offer taken have in common.
func (c *connRef) lease(reused bool, idle time.Duration) Lease {
	return Lease{ConnID: c.id, Conn: c.pid, Inbox: c.inbox, Reused: reused, IdleTime: idle,
		NetConn: c.netConn, TLSState: c.tlsState, H2: c.h2}
}

// take receives an offer from the route's outbox, if one is there, without
// blocking: on an empty outbox it is a load, and takes no lock. now is when
// the caller's request started (or later). It reports false, with nothing
// taken, when the outbox is empty, or when the offer it took was past its
// due time: it declines that one (OfferDeclined), and the caller leases
// another way.
func (h *routeHandle) take(now time.Time) (Lease, bool) {
	var o offer
	select {
	case o = <-h.outbox:
	default:
		return Lease{}, false
	}
	if !o.until.IsZero() && !now.Before(o.until) {
		h.post(&OfferDeclined{ConnID: o.conn.id, At: now})
		return Lease{}, false
	}
	var idle time.Duration
	if !o.idleSince.IsZero() {
		idle = max(0, now.Sub(o.idleSince)) // now is the call's start, which may predate the offer
	}
	l := o.conn.lease(true, idle)
	l.Offered = true
	return l, true
}

// refill puts idle HTTP/1.1 connections, most recently used first, in the outbox, while it
// has room, nobody waits in the FIFO and the route may keep connections idle
// (it is not closing, and no room is wanted of it). Only connections that
// have served a request are offered (a new one is for a waiter, fresh or
// not, through the idle list), and only those not yet due for retirement.
// Runs after every message.
func (r *Route) refill() {
	if r.outbox == nil || r.waiters.Len() > 0 || r.closed || r.roomWanted || r.shed || len(r.outbox) == cap(r.outbox) {
		return
	}
	for i := len(r.idle) - 1; i >= 0 && len(r.outbox) < cap(r.outbox); i-- {
		cs := r.idle[i]
		if !cs.proto.exclusive() || cs.served == 0 {
			continue
		}
		until := r.dueAt(cs, cs.idleSince, r.clock())
		if !until.IsZero() && !r.clock().Before(until) {
			continue // expired: the next lease or expiry tick closes it
		}
		r.removeIdle(cs) // from the end of what is left before i: nothing else moves
		cs.phase = phaseOffered
		cs.offerIdx = len(r.offered)
		r.offered = append(r.offered, cs)
		r.offeredIdleSince(cs.idleSince)
		r.outbox <- offer{conn: &cs.connRef, idleSince: cs.idleSince, until: until} // never blocks: only the route sends
	}
}

// takeBack empties the outbox: each offer it gets back goes back on the idle
// list, in its place by idle time; every other connection on offer was
// taken by a caller and is leased from now on (taken). Called before a caller queues, and before the
// route closes, evicts or expires connections.
func (r *Route) takeBack() {
	if len(r.offered) == 0 {
		return
	}
	r.offerLRU = 0
	for {
		var o offer
		select {
		case o = <-r.outbox:
		default:
			for _, cs := range r.offered {
				r.taken(cs)
			}
			clear(r.offered)
			r.offered = r.offered[:0]
			return
		}
		cs := r.conns[o.conn.id]
		r.unoffer(cs)
		cs.phase = phaseIdle
		r.insertIdle(cs)
	}
}

// unoffer takes cs off the list of connections on offer.
func (r *Route) unoffer(cs *connState) {
	i, last := cs.offerIdx, len(r.offered)-1
	r.offered[i] = r.offered[last]
	r.offered[i].offerIdx = i
	r.offered[last] = nil
	r.offered = r.offered[:last]
	cs.offerIdx = -1
}

// taken records that a caller took cs from the outbox: from now on it is
// leased, as if granted now (its lease is counted when the route learns of
// it: here).
func (r *Route) taken(cs *connState) {
	now := r.clock()
	cs.offerIdx = -1
	cs.phase = phaseLeased
	cs.lastIdle = now.Sub(cs.idleSince)
	cs.idleSince = time.Time{}
	cs.leasedAt = now
	cs.dial = DialTiming{}
	r.countOffer(true)
}

// countOffer counts a lease taken from the outbox, once the route learns of
// it (up: every offer is of a connection that has served a request), or
// takes that count back (an offer it had counted, given back unused or
// declined: no lease). An offer given back for a connection the route no
// longer has was counted: the route closes a connection on offer only after
// a take-back, which counts every offer of it that did not come back.
func (r *Route) countOffer(up bool) {
	if up {
		r.leases++
		r.reuses++
		r.offeredN++
		return
	}
	r.leases--
	r.reuses--
	r.offeredN--
}

// insertIdle puts cs on the idle list in its place by idle time (the list is
// least recently used first): an offer taken back goes where it was.
func (r *Route) insertIdle(cs *connState) {
	i := len(r.idle)
	for i > 0 && r.idle[i-1].idleSince.After(cs.idleSince) {
		i--
	}
	r.idle = append(r.idle, nil)
	copy(r.idle[i+1:], r.idle[i:])
	r.idle[i] = cs
	for j := i; j < len(r.idle); j++ {
		r.idle[j].idleIdx = j
	}
}

// onOfferDeclined: a caller took a connection from the outbox past its due
// time (by its clock, at m.At) and gives it back unused. It is closed for the
// reason it was due then.
func (r *Route) onOfferDeclined(ctx actor.Context, m *OfferDeclined) {
	cs := r.conns[m.ConnID]
	if cs == nil { // a take-back counted it taken before its connection closed (see countOffer)
		r.countOffer(false)
		return
	}
	if !r.unlease(cs) {
		return
	}
	reason, dead := r.expired(cs, m.At)
	if !dead {
		reason = route.ReasonIdleExpired // due by a learned idle time the route has since revised
	}
	r.closeConn(ctx, cs, reason)
}

// unlease makes a connection a caller took from the outbox and did not use
// idle again, as it was before the offer, whether or not the route has
// learned it was taken; false if it is neither on offer nor leased.
func (r *Route) unlease(cs *connState) bool {
	switch cs.phase {
	case phaseOffered:
		r.unoffer(cs)
	case phaseLeased: // takeBack found it taken, and counted its lease
		cs.idleSince = cs.leasedAt.Add(-cs.lastIdle)
		r.countOffer(false)
	default:
		return false
	}
	cs.phase = phaseIdle
	return true
}

// offerBack takes back a connection a caller took from the outbox and gave
// back unused (its request was given up before anything was written): closed
// if its address left the resolved set or it is due, to the oldest waiter that
// can take it, or back on the idle list as it was (idle since it was last
// used).
func (r *Route) offerBack(ctx actor.Context, cs *connState) {
	if !r.unlease(cs) || r.drained(ctx, cs) {
		return
	}
	now := r.clock()
	if reason, dead := r.expired(cs, now); dead {
		r.closeConn(ctx, cs, reason)
		return
	}
	if r.waiters.Len() > 0 {
		r.available(ctx, cs, now)
		return
	}
	r.insertIdle(cs)
}

// offeredIdleSince keeps the earliest idle time of what is on offer (the
// route publishes it as its least recently used idle connection, with the
// idle list's head).
func (r *Route) offeredIdleSince(t time.Time) {
	if since := t.UnixNano(); r.offerLRU == 0 || since < r.offerLRU {
		r.offerLRU = since
	}
}

// onOffer reports whether cs is on offer: in the outbox, or held by a caller
// the route has not heard from. The route takes offers back before it closes
// such a connection.
func (r *Route) onOffer(cs *connState) bool { return cs.phase == phaseOffered }

// offeredIdle is how many connections on offer are idle: those still in the
// outbox.
func (r *Route) offeredIdle() int { return len(r.outbox) }
