package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// HTTP/2 in the outbox: a route offers stream slots of an HTTP/2 connection
// with free streams, as it offers idle HTTP/1.1 connections, under the same
// rules (route_outbox.go), which for a slot read:
//
//  1. An offer is one stream slot of one connection. The route counts it in
//     use (http2Conn.offered) from the moment it puts it in the outbox, so
//     the peer's MAX_CONCURRENT_STREAMS, StrictMaxConcurrentRequests and
//     MaxRequestsPerConn (h2Room) count what callers may take: no more slots
//     are offered and leased than the connection has room for.
//  2. A caller that takes a slot holds a stream lease, exactly as if the
//     route had granted it (Lease.H2, Reused, the telemetry's HTTP2), until
//     its Released, which says Offered: the route learns of the lease then,
//     or at a take-back, whichever comes first (heardH2).
//  3. The outbox holds the slots of one connection at a time (outboxH2), and
//     never slots and HTTP/1.1 connections together, so that the route knows
//     whether a connection whose streams are all offered is idle (all its
//     slots still in the outbox: offeredIdle). An idle connection put on
//     offer leaves the idle list (phaseOffered) and comes back to it, in its
//     place, when every slot comes back.
//  4. The route takes the slots back (takeBack) where it takes HTTP/1.1
//     offers back (before a caller queues, before it closes, evicts or
//     expires connections, when it stops), and also when the connection
//     drains (GOAWAY, refused streams), closes, is retired (retireOffered),
//     or has its limit lowered below what is in use (StreamsChanged): a slot
//     it gets back is free again; one it cannot get back was taken, and is a
//     leased stream until its Released. When the connection's last stream
//     ends, the slots still in the outbox come back too (offeredIdleH2), to
//     be offered anew with the connection's new idle time and due time. A
//     slot taken after the peer lowered its limit, or after a GOAWAY, meets
//     the connection's own count: h2.Conn refuses a stream above the peer's
//     limit, as not sent, and the call replays it on another connection.
//  5. Only connections that have served a stream are offered (a new one
//     serves the waiter it was dialed for), and none that drains, is due
//     for retirement, or is expired idle.

// refillH2 offers stream slots of one HTTP/2 connection, up to the outbox's
// capacity and the connection's room, and reports whether the outbox holds
// stream slots (then no HTTP/1.1 connection is offered beside them). The
// connection is the one whose slots the outbox holds; when the outbox is
// empty and that one has no room, the one with the most room.
func (r *Route) refillH2() bool {
	now := r.clock()
	h, room := r.outboxH2, 0
	if h != nil {
		room = r.h2Room(h, now)
	}
	if len(r.outbox) == 0 && room <= 0 {
		h, room = r.h2ToOffer(now)
		r.outboxH2 = h
	}
	if h == nil {
		return false
	}
	n := min(room, cap(r.outbox)-len(r.outbox))
	if n <= 0 {
		return true
	}
	cs := h.cs
	o := offer{conn: &cs.connRef}
	idleSince := now // a connection that carries streams: due, if it comes to be idle on offer, from now
	if h.streams == 0 {
		idleSince, o.idleSince = cs.idleSince, cs.idleSince
	}
	if o.until = r.dueAt(cs, idleSince, now); !o.until.IsZero() && !now.Before(o.until) {
		// Idle too long: the next lease or expiry tick closes it (after a
		// take-back, if slots of it are still on offer).
		if len(r.outbox) == 0 {
			r.outboxH2 = nil
			return false
		}
		return true
	}
	if h.streams == 0 && h.offered == 0 { // idle: off the idle list, on offer
		if cs.idleIdx >= 0 {
			r.removeIdle(cs)
		}
		cs.phase = phaseOffered
		r.offeredIdleSince(cs.idleSince)
	}
	for range n {
		r.outbox <- o // never blocks: only the route sends
	}
	h.offered += n
	r.h2Offered += n
	return true
}

// retireOffered retires the connection whose slots the outbox holds once the
// route retires it (retireReason: its lifetime is over, MaxRequestsPerConn,
// its address left the resolved set), as it would an idle HTTP/1.1
// connection: it takes the slots back, and closes the connection unless a
// stream is in flight on it (one a caller took counts: it closes after its
// last stream, closeDrained). Without it, a connection idle on offer would
// close only when callers declined its slots past their due time, or at the
// next expiry tick. Runs after every message, before the outbox is refilled.
func (r *Route) retireOffered(ctx actor.Context) {
	h := r.outboxH2
	if h == nil || len(r.outbox) == 0 {
		return
	}
	reason := r.retireReason(h, r.clock())
	if reason == "" {
		return
	}
	h.draining = true
	r.takeBack()
	if h.streams == 0 {
		r.closeConn(ctx, h.cs, reason)
	}
}

// h2ToOffer returns the HTTP/2 connection with the most room that may be
// offered, and its room: one that has served a stream, and, if idle, is not
// due for retirement; nil when none.
func (r *Route) h2ToOffer(now time.Time) (*http2Conn, int) {
	var best *http2Conn
	bestRoom := 0
	for _, h := range r.h2 {
		cs := h.cs
		if cs.served == 0 {
			continue
		}
		if cs.idleIdx >= 0 {
			if _, dead := r.expired(cs, now); dead {
				continue // the next lease or expiry tick closes it
			}
		}
		if room := r.h2Room(h, now); room > bestRoom {
			best, bestRoom = h, room
		}
	}
	return best, bestRoom
}

// offeredIdleSince keeps the earliest idle time of what is on offer (the
// route publishes it as its least recently used idle connection, with the
// idle list's head).
func (r *Route) offeredIdleSince(t time.Time) {
	if since := t.UnixNano(); r.offerLRU == 0 || since < r.offerLRU {
		r.offerLRU = since
	}
}

// offeredIdleH2 records that h's last leased stream ended while slots of it
// are on offer, and reports whether some still are. The slots still in the
// outbox carry the idle time and the due time of when they were offered
// (offers are never changed once sent), so the route takes them back
// (recallH2), and offers them anew after this message, idle from now: a
// caller would decline a usable slot past an earlier due time, and read a
// lease's IdleTime from an earlier idle time. With none of its slots held by
// a caller, h is then idle, and reports false; otherwise it is idle on
// offer, from now, until a slot is heard of or every slot comes back.
// A connection already idle on offer has only slots offered since it became
// idle: nothing to take back.
func (r *Route) offeredIdleH2(h *http2Conn, now time.Time) bool {
	cs := h.cs
	if cs.phase == phaseOffered {
		return true
	}
	r.recallH2(h)
	if h.offered == 0 {
		return false
	}
	cs.phase = phaseOffered
	cs.idleSince = now
	r.offeredIdleSince(now)
	return true
}

// recallH2 takes back h's slots that are still in the outbox: free again.
// The slots a caller took stay offered, until the route hears of them or
// takes the outbox back (takeBack).
func (r *Route) recallH2(h *http2Conn) {
	if r.outboxH2 != h {
		return // the outbox holds no slot of h (rule 3)
	}
	for {
		select {
		case <-r.outbox:
			h.offered--
			r.h2Offered--
		default:
			return
		}
	}
}

// takenH2 ends a take-back for stream slots, once the outbox is empty: a
// connection's slots that did not come back were taken, and are leased
// streams from now on (counted as leases now: their Released finds them
// counted, taken); a connection idle on offer whose slots all came back is
// idle again, in its place.
func (r *Route) takenH2() {
	if r.outboxH2 == nil && r.h2Offered == 0 {
		return
	}
	for _, h := range r.h2 {
		cs := h.cs
		switch {
		case h.offered > 0:
			for range h.offered {
				r.leaseOffered(h)
			}
			h.taken += h.offered
			h.offered = 0
		case cs.phase == phaseOffered:
			cs.phase = phaseIdle
			r.insertIdle(cs)
		}
	}
	r.h2Offered = 0
	r.outboxH2 = nil
}

// leaseOffered makes one offered slot of h a leased stream and counts its
// lease.
func (r *Route) leaseOffered(h *http2Conn) {
	cs := h.cs
	if cs.phase == phaseOffered { // it was idle on offer
		now := r.clock()
		cs.lastIdle = now.Sub(cs.idleSince)
		cs.idleSince = time.Time{}
		cs.leasedAt = now
	}
	cs.phase = phaseLeased
	h.streams++
	r.countOffer(true)
}

// heardH2 records that a caller took one of h's offered slots (its Released,
// or its lease given back, says so): a leased stream from now on, counted,
// unless a take-back found it taken and counted it already. The slots are
// alike, so the first that are heard of are those a take-back counted.
func (r *Route) heardH2(h *http2Conn) {
	if h.taken > 0 {
		h.taken--
		return
	}
	if h.offered == 0 {
		panic("actors: internal error: an HTTP/2 offer taken that was never made")
	}
	h.offered--
	r.h2Offered--
	r.leaseOffered(h)
}

// giveBackH2 takes back an offered slot of h that its caller gives back
// unused (its request was given up before anything was written, or it
// declined the offer past its due time): no lease. A slot the route had not
// heard of is free again; one a take-back counted is a stream given back.
func (r *Route) giveBackH2(ctx actor.Context, h *http2Conn) {
	if h.taken > 0 {
		h.taken--
		h.streams--
		r.countOffer(false)
	} else {
		h.offered--
		r.h2Offered--
	}
	r.availableH2(ctx, h, r.clock())
}

// onOffer reports whether cs is on offer, in whole or by a stream slot: in
// the outbox, or held by a caller the route has not heard from. The route
// takes offers back before it closes such a connection.
func (r *Route) onOffer(cs *connState) bool {
	if h, ok := cs.proto.(*http2Conn); ok {
		return h.offered > 0
	}
	return cs.phase == phaseOffered
}

// offeredIdle is how many connections on offer are idle: the HTTP/1.1 ones
// still in the outbox, or the HTTP/2 connection whose slots it holds when
// that carries no stream and none of its slots was taken.
func (r *Route) offeredIdle() int {
	h := r.outboxH2
	if h == nil {
		return len(r.outbox)
	}
	if h.streams == 0 && h.offered > 0 && h.offered == len(r.outbox) {
		return 1
	}
	return 0
}
