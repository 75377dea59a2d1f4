package actors

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/conn/h2"
	"github.com/connactor/connactor/route"
)

// HTTP/2 on a route: the route leases streams, not connections. An HTTP/2
// connection is shared capacity: it counts once against MaxConnsPerRoute and
// MaxConnsTotal, is leased while it carries streams and idle (on the idle
// list, for LRU eviction and expiry) while it carries none. A lease goes to
// the connection with the fewest streams in flight. The route opens another
// connection for waiters only when every connection it has is full (never, with
// StrictMaxConcurrentRequests, while one is usable), one dial at a time
// (golang/go#27044, #34941), and while a dial's protocol is not known yet it
// dials one at a time too, so that a cold burst does not open a connection
// per request (golang/go#39389). Over a host's addresses, it also keeps a
// connection per address as load needs them (route_h2_spread.go).

// dialProto is what the route's dials give: unknown until the first dial.
type dialProto uint8

const (
	protoUnknown dialProto = iota
	protoH1
	protoH2
)

// h2Possible reports whether a dial of route k may give an HTTP/2
// connection, and whether HTTP/2's strict stream limit is on.
func h2Possible(k route.Key, cfg *RouteConfig) (possible, strict bool) {
	o := cfg.Conn
	if o == nil {
		return false, false
	}
	switch k.Scheme {
	case "https":
		possible = slices.Contains(o.ALPN, "h2")
	case "http":
		possible = o.H2C && !k.AbsoluteForm()
	}
	return possible, possible && o.HTTP2 != nil && o.HTTP2.StrictMaxConcurrentRequests
}

// dialsH2 reports whether the route's next dial follows HTTP/2's rules (one
// dial at a time, only when every connection is full).
func (r *Route) dialsH2() bool {
	return r.h2Possible && r.dialProto != protoH1
}

// h2WithRoom returns the HTTP/2 connection with room for a stream and the
// fewest streams in flight (least outstanding: the streams of a host spread
// over the connections to its addresses, route_h2_spread.go), among as few
// the most recently leased (a lone caller keeps to one connection, and the
// others stay idle, to expire), but avoid; nil when none has room. Idle
// connections due for retirement are closed as it meets them, as popIdle
// does.
func (r *Route) h2WithRoom(ctx actor.Context, avoid uint64) *connState {
	if r.dialProto != protoH2 {
		return nil
	}
	now := r.clock()
	var best *http2Conn
	for _, h := range r.h2 {
		cs := h.cs
		if cs.id == avoid || cs.phase == phaseIdle && r.closeIfDue(ctx, cs, now) || r.h2Room(h, now) <= 0 {
			continue
		}
		if best == nil || h.n < best.n || h.n == best.n && cs.leasedAt.After(best.cs.leasedAt) {
			best = h
		}
	}
	if best == nil {
		return nil
	}
	return best.cs
}

// learnH2Limit keeps the stream limit h's server announced (SETTINGS), when
// it has: the limit of the route's next connections until their own
// SETTINGS arrive (h2Limit). Called on the connection's events (Dialed,
// StreamsChanged).
func (r *Route) learnH2Limit(h *http2Conn) {
	if st := h.conn.Streams(); st.Settings {
		r.h2Limit = st.Limit
	}
}

// h2Limit is how many streams h takes, by the connection's own view of its
// limit (st, read by the caller): the events that report it (StreamsChanged)
// may still be on their way, and a stream leased beyond the peer's limit
// would be refused. Until a new connection's SETTINGS arrive, its limit is
// the one the route's server announced on an earlier connection, when there
// was one (the 100 assumed otherwise, golang/go#39389): a server that takes
// 4 streams is not sent 100 on each new connection, to refuse 96 of them.
func (r *Route) h2LimitOf(st h2.Streams) int {
	if !st.Settings && r.h2Limit > 0 {
		return min(st.Limit, r.h2Limit)
	}
	return st.Limit
}

// awaitsSettings reports that h is the route's first HTTP/2 connection and
// its server's SETTINGS have not arrived: it carries one stream until they
// do (StreamsChanged follows), and the route neither leases it more nor
// dials for the callers who wait meanwhile. The engine waits for a free
// stream slot rather than fail a stream (conn/h2, strict slots), so a stream
// leased above a limit the server has announced and the connection has not
// yet learned would wait on this connection for others to end, however
// long they last, instead of being replayed on another one.
func (r *Route) awaitsSettings(h *http2Conn, st h2.Streams) bool {
	return r.h2Limit == 0 && !st.Settings && !h.drains(st)
}

// drains reports whether h takes no new stream on its own account: it
// reported a drain (DrainStarted), or its engine drains or closed and the
// report is on its way (st, its own view).
func (h *http2Conn) drains(st h2.Streams) bool { return h.draining || st.Draining || st.Closed }

// h2Room is how many more streams h may be leased: its limit less the
// streams it carries, and no more than MaxRequestsPerConn allows (streams
// leased count as served). It is negative when the peer lowered its limit
// below what is in use, and 0 when the connection drains, on its own
// account or because the route retires it (retireReason): the route leases
// it no new stream and closes it after its last one (onH2Closed). The
// connection itself is not told: streams leased and not yet started must
// still start. A query: it changes nothing (one lock of the connection's,
// no I/O).
func (r *Route) h2Room(h *http2Conn, now time.Time) int {
	st := h.conn.Streams()
	if h.drains(st) || r.retireReason(h.cs, false, now) != "" {
		return 0
	}
	room := r.h2LimitOf(st) - h.n
	if r.awaitsSettings(h, st) {
		room = min(room, 1-h.n)
	}
	if limit := r.cfg.MaxRequestsPerConn; limit > 0 {
		room = min(room, limit-h.cs.served-h.n)
	}
	return room
}

// wantH2Conns asks for one permit when callers wait, no dial is under way, and
// every usable HTTP/2 connection that a waiter may take (LeaseRequest.Avoid)
// is full (strict mode: none is usable). A connection with room first serves
// the waiters that may take it: they queued behind one that avoids it, so
// neither onLease nor a stream's end served them.
func (r *Route) wantH2Conns(ctx actor.Context) {
	if r.waiters.Len() == 0 {
		r.wantH2Spread(ctx) // a connection per address, as load needs (route_h2_spread.go)
		return
	}
	if !r.hasRoom() {
		return // the limit holds the waiters: a stream ending serves them
	}
	r.spread.leased = false // callers wait: the rule below dials for them
	now := r.clock()
	usable := 0
	for _, h := range r.h2 {
		room := r.h2Room(h, now) > 0
		if room && r.waiterFor(h.cs) {
			r.availableH2(ctx, h, now)
			room = r.h2Room(h, now) > 0
		}
		if !r.waiterFor(h.cs) {
			continue // every waiter avoids it (or none is left)
		}
		st := h.conn.Streams()
		if room || r.awaitsSettings(h, st) {
			return // it will say how much room it has: the waiters are being served
		}
		if !h.drains(st) && r.retireReason(h.cs, false, now) == "" {
			usable++
		}
	}
	if r.waiters.Len() == 0 || r.dialing+r.permitsPending > 0 { // one dial at a time, half-open breaker or not
		return
	}
	if r.strict && usable > 0 {
		return // StrictMaxConcurrentRequests: callers wait for a stream
	}
	if len(r.conns) >= r.cfg.MaxConnsPerRoute {
		return
	}
	r.permitsPending++
	ctx.Send(r.sup, r.permitReq)
}

// availableH2 hands the free streams of h to waiters in arrival order, but
// not to one that avoids it (a replay after it refused the request: it waits
// for another connection, wantH2Conns); a connection left without streams
// becomes idle, or is closed for another route's room or because the route
// retires it, or, draining on its own account, waits for its H2Closed.
func (r *Route) availableH2(ctx actor.Context, h *http2Conn, now time.Time) {
	cs := h.cs
	for r.h2Room(h, now) > 0 && r.hasRoom() {
		w, q, ok := r.nextWaiter(func(w waiter) bool { return w.req.Avoid != cs.id })
		if !ok {
			break
		}
		r.grant(w, cs, q) // a waiter that gave up takes nothing: the next one is tried
	}
	if h.n > 0 {
		return // a request in flight is never cut
	}
	if r.shed {
		r.closeConn(ctx, cs, route.ReasonFleetShare) // above the fleet share: down to it
		return
	}
	if cs.phase == phaseIdle {
		return
	}
	if reason := r.retireReason(cs, false, now); reason != "" {
		r.closeConn(ctx, cs, reason)
		return
	}
	if h.drains(h.conn.Streams()) {
		return // its H2Closed names the reason (onH2Closed)
	}
	r.idleOrClose(ctx, cs, now, r.roomWanted)
}

// waiterFor reports whether a waiter may be leased a stream of cs: one that
// does not avoid it. It looks no further than the first such waiter, the
// oldest one as a rule.
func (r *Route) waiterFor(cs *connState) bool {
	_, _, ok := r.waiters.Find(func(w waiter) bool { return w.req.Avoid != cs.id })
	return ok
}

// onStreamsChanged keeps the limit a connection's server announced, and
// hands the streams a new limit frees to the waiters (h2Room reads the
// limit from the connection itself).
func (r *Route) onStreamsChanged(ctx actor.Context, m *conn.StreamsChanged) {
	if h := r.h2[m.ID]; h != nil { // dialed: only a dialed connection is known to speak HTTP/2
		r.learnH2Limit(h)
		r.availableH2(ctx, h, r.clock())
	}
}

// onDrainStarted stops leasing streams on a connection that drains (GOAWAY,
// refused streams, or a drain of the route's); it still counts against the
// limits until its last stream ends.
func (r *Route) onDrainStarted(ctx actor.Context, m *conn.DrainStarted) {
	h := r.h2[m.ID]
	if h == nil {
		return
	}
	h.draining = true
	if h.n == 0 {
		r.closeConn(ctx, h.cs, m.Reason)
	}
}

func (r *Route) onH2Closed(ctx actor.Context, m *conn.H2Closed) {
	if cs := r.conns[m.ID]; cs != nil {
		r.closeConn(ctx, cs, m.Reason)
	}
}

// streams is the number of HTTP/2 streams leased on the route.
func (r *Route) streams() int {
	n := 0
	for _, h := range r.h2 {
		n += h.n
	}
	return n
}
