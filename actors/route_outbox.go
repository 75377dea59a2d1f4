package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/route"
)

// outbox is a route's outbox: the one way state leaves a route's Receive
// without a reply. A route that has idle HTTP/1.1 connections and nobody
// waiting in its FIFO offers a few of them in a buffered channel, and a
// caller's lease takes one with a non-blocking receive, without a message to
// the route: an uncontended request then costs the route one message (its
// Released), not two. These are its rules, written here only:
//
//  1. Only the route sends to its outbox, inside its Receive, and only while
//     no caller waits in its FIFO (Route.refill): a caller that queued is
//     never overtaken by one that takes an offer after it queued.
//  2. A caller takes an offer with a non-blocking receive (routeHandle.take).
//     Taking an offer is receiving a message from the route: the connection
//     is the caller's, exactly as if the route had granted it, until its
//     Released (or, for an offer past its connection's due time, its
//     OfferDeclined; for a request given up before anything was written, its
//     LeaseCancelled). Callers that must not take a re-used connection (a
//     fresh replay), or that avoid one, send a LeaseRequest instead.
//  3. Everything else stays the route's: its FIFO, the limits (an offered
//     connection is open and counted), LRU eviction, expiry and statistics.
//     Stats count what has left the outbox at every read: an offer still in
//     it is idle, one taken is leased.
//  4. The route takes offers back by receiving from its own outbox
//     (Route.takeBack): what it gets back was idle; what it cannot get back
//     was taken, and is leased until its Released. It does so before a
//     caller queues (so that no caller queues while an offer waits), before
//     it closes, evicts or expires idle connections, and when it stops;
//     closeConn takes back by itself a connection on offer.
//  5. Releases stay messages.
//  6. At most offerDepth connections are offered, the most recently used
//     idle ones, and only those that have served a request (a new one is for
//     a waiter) and are not due for retirement: if every idle connection
//     were offered, callers would take the oldest offer first and use every
//     connection in turn, none would stay idle long enough to expire, and a
//     pool grown by a burst would never shrink. With a few offers, refilled
//     from the most recently used end of the idle list, only those few
//     rotate; the others expire, or are evicted, from the idle list.
//
// HTTP/2 streams are never on offer: a stream lease is a LeaseRequest. The
// message an offer saves cost the route 0.5-2 us of CPU on requests that
// cost 25-140 us, within the end-to-end benchmarks' noise, and a stream
// taken without a message was missing from Stats until the route heard of
// it.
//
// Route state: touched only in the route's Receive (the channel's receiving
// end is the callers').
type outbox struct {
	ch chan offer
	// offered are the connections put in ch and not taken back or heard from
	// since: each is in ch or held by a caller (connState.offerIdx).
	offered []*connState
	// lru is the earliest idle time of the connections offered since the
	// last take-back (unix nanos; 0 = none): with the idle list's head, what
	// the route publishes as its least recently used idle connection (an
	// offer taken since makes it look older than it is, until the next
	// take-back, at the latest the next expiry tick).
	lru int64
}

// offerDepth is the outbox's capacity: how many idle connections a route
// offers at most (fewer when MaxConnsPerRoute is lower). Every Released runs
// the route and refills the outbox; a lease that finds it empty meanwhile
// sends a LeaseRequest, which the idle list serves as fast, only with a
// message more.
const offerDepth = 4

// outboxDepth is the capacity of route k's outbox: offerDepth, or fewer for
// a route that may hold fewer connections.
func outboxDepth(_ route.Key, cfg *RouteConfig) int {
	return max(1, min(offerDepth, cfg.MaxConnsPerRoute))
}

// offer is an idle HTTP/1.1 connection in a route's outbox: a value, never
// changed once sent.
type offer struct {
	conn      *connRef
	idleSince time.Time
	// until is when the route retires the connection if it is still idle
	// then (Route.dueAt; zero: never). A caller that takes the offer at or
	// after it declines it (OfferDeclined): the route closes it.
	until time.Time
}

// put offers cs, just taken off the idle list (toOffered): never blocks,
// only the route sends, and only while ch has room.
func (o *outbox) put(cs *connState, until time.Time) {
	cs.offerIdx = len(o.offered)
	o.offered = append(o.offered, cs)
	if since := cs.idleSince.UnixNano(); o.lru == 0 || since < o.lru {
		o.lru = since
	}
	o.ch <- offer{conn: &cs.connRef, idleSince: cs.idleSince, until: until}
}

// remove takes cs off the list of connections on offer: it came back, or
// the route heard from the caller that took it.
func (o *outbox) remove(cs *connState) {
	i, last := cs.offerIdx, len(o.offered)-1
	o.offered[i] = o.offered[last]
	o.offered[i].offerIdx = i
	o.offered[last] = nil
	o.offered = o.offered[:last]
	cs.offerIdx = -1
}

// full reports whether ch has no room for another offer.
func (o *outbox) full() bool { return len(o.ch) == cap(o.ch) }

// idle is how many connections on offer are idle: those still in ch.
func (o *outbox) idle() int { return len(o.ch) }

// refill offers idle HTTP/1.1 connections, most recently used first, while
// the outbox has room, nobody waits in the FIFO and the route may keep
// connections idle (it is not closing, and no room is wanted of it): rules
// 1 and 6 of outbox. Runs after every message.
func (r *Route) refill() {
	if r.out.ch == nil || r.waiters.Len() > 0 || r.closed || r.roomWanted || r.shed || r.out.full() {
		return
	}
	now := r.clock()
	for i := len(r.idle) - 1; i >= 0 && !r.out.full() && r.hasRoom(); i-- {
		cs := r.idle[i]
		if !cs.proto.exclusive() || cs.served == 0 {
			continue
		}
		if r.retireReason(cs, true, now) != "" {
			continue // to retire (the whole rule): the next lease or expiry tick closes it
		}
		until := r.dueAt(cs, now)
		r.toOffered(cs) // from the end of what is left before i: nothing else moves
		r.out.put(cs, until)
	}
}

// takeBack empties the outbox (rule 4 of outbox): each offer it gets back
// goes back on the idle list, in its place by idle time; every other
// connection on offer was taken by a caller and is leased from now on,
// counted as a lease taken from the outbox.
func (r *Route) takeBack() {
	if len(r.out.offered) == 0 {
		return
	}
	r.out.lru = 0
	for {
		select {
		case o := <-r.out.ch:
			cs := r.conns[o.conn.id]
			r.out.remove(cs)
			r.toIdle(cs, cs.idleSince)
			continue
		default:
		}
		break
	}
	now := r.clock()
	for _, cs := range r.out.offered {
		cs.offerIdx = -1
		r.toLeased(cs, now, true)
	}
	clear(r.out.offered)
	r.out.offered = r.out.offered[:0]
}

// heard records that the route heard from the caller that took cs from the
// outbox (its Released): leased from now on, its lease counted.
func (r *Route) heard(cs *connState) {
	r.out.remove(cs)
	r.toLeased(cs, r.clock(), true)
}

// onOfferDeclined: a caller took a connection from the outbox past its due
// time (by its clock, at m.At) and gives it back unused. It is closed for the
// reason it was due then.
func (r *Route) onOfferDeclined(ctx actor.Context, m *OfferDeclined) {
	cs := r.conns[m.ConnID]
	if !r.toFree(cs, true) {
		return
	}
	reason := r.retireReason(cs, true, m.At)
	if reason == "" {
		reason = route.ReasonIdleExpired // due by a learned idle time the route has since revised
	}
	r.closeConn(ctx, cs, reason)
}

// givenBack takes back an HTTP/1.1 connection a caller gave back unused
// (its request was given up before anything was written), taken from the
// outbox (offered: no lease is counted) or granted (toFree); it is closed
// if it must retire, idle since it was last used; else it goes where a
// connection that came free goes (available: the oldest waiter that can
// take it, or closed for the fleet share or a route that wants room, or
// the idle list), and back on the idle list as it was, idle since it was
// last used (from now when it never was: dialed for this lease).
func (r *Route) givenBack(ctx actor.Context, cs *connState, offered bool) {
	var since time.Time
	if cs != nil {
		since = cs.idleSince
	}
	if !r.toFree(cs, offered) {
		return
	}
	now := r.clock()
	if reason := r.retireReason(cs, !since.IsZero(), now); reason != "" { // idle caps for one that was idle
		r.closeConn(ctx, cs, reason)
		return
	}
	r.available(ctx, cs, now)
	if cs.phase == phaseIdle && !since.IsZero() {
		r.removeIdle(cs)
		r.toIdle(cs, since)
	}
}
