package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn/h2"
	"github.com/connactor/connactor/route"
)

// connProto is what a route does differently for an HTTP/1.1 connection and
// an HTTP/2 one, and the only way the route tells them apart: everything
// else of the route treats them alike. A connection's protocol is known once
// it is dialed (connState.proto; HTTP/1.1 until then). All of it is route
// state: touched only in the route's Receive.
type connProto interface {
	// granted records a lease of cs (for HTTP/2, one more stream on it).
	granted(cs *connState)
	// ungrant undoes granted, for a lease its caller gave back untouched.
	ungrant(cs *connState)
	// released handles the lease holder's Released of cs.
	released(ctx actor.Context, r *Route, cs *connState, m *Released)
	// available hands cs, free again (released, given back or dialed), to
	// the waiters that can take it, or makes it idle, or closes it.
	available(ctx actor.Context, r *Route, cs *connState, now time.Time)
	// exclusive reports whether a lease takes the whole connection
	// (HTTP/1.1): one such is leased off the idle list (popIdle), offered in
	// the outbox, and its actor is recycled when it closes. An HTTP/2
	// connection is leased by streams (h2WithRoom) and its actor stops with
	// it.
	exclusive() bool
	// streams is the streams it carries (HTTP/2; 0 for HTTP/1.1).
	streams() int
}

// http1Conn is an HTTP/1.1 connection: it serves one request at a time, and
// while idle its connection actor watches the socket.
type http1Conn struct{}

func (http1Conn) granted(*connState) {}
func (http1Conn) ungrant(*connState) {}
func (http1Conn) exclusive() bool    { return true }
func (http1Conn) streams() int       { return 0 }

// released closes the connection when the exchange failed or left it not
// reusable, or else makes it available (which retires it if it must: its
// lifetime, MaxRequestsPerConn), with the idle cap the server announced.
func (http1Conn) released(ctx actor.Context, r *Route, cs *connState, m *Released) {
	now := r.clock()
	switch {
	case m.Failed:
		r.closeConn(ctx, cs, route.ReasonError) // as onTerminated, if it came first, would
	case !m.Reusable:
		r.closeConn(ctx, cs, route.ReasonNotReusable)
	default:
		cs.idleUntil = time.Time{}
		if m.Idle > 0 {
			cs.idleUntil = now.Add(m.Idle)
		}
		r.available(ctx, cs, now) // retired as it comes free, never mid-request
	}
}

// available hands the connection to the oldest waiter that can take it (a
// fresh waiter only a connection that has served nothing), or makes it idle.
// When the supervisor wants room for other routes and no waiter here needs
// it, the connection is closed at once: it would be the least recently used
// idle connection anyway.
func (http1Conn) available(ctx actor.Context, r *Route, cs *connState, now time.Time) {
	if r.shed {
		r.closeConn(ctx, cs, route.ReasonFleetShare) // above the fleet share: down to it
		return
	}
	fresh := cs.served == 0
	for r.hasRoomFor(cs) {
		w, q, ok := r.nextWaiter(func(w waiter) bool { return fresh || !w.req.Fresh })
		if !ok {
			break
		}
		if r.grant(w, cs, q) {
			return
		}
	}
	if r.idleOrClose(ctx, cs, now, r.roomWanted) {
		ctx.Send(cs.pid, wentIdle) // watch the socket while idle
	}
}

// http2Conn is an HTTP/2 connection (route_h2.go): shared capacity, leased by
// streams up to its limit, leased while it carries any and idle (on the idle
// list) while it carries none. The route also keeps it in Route.h2, by ID.
type http2Conn struct {
	cs   *connState
	conn *h2.Conn
	// n is the streams leased on it.
	n int
	// draining is set when the connection reports that it drains
	// (DrainStarted: a GOAWAY, refused streams): it takes no new stream, and
	// closes itself once its last one ends.
	draining bool
}

func (h *http2Conn) granted(*connState) { h.n++ }
func (h *http2Conn) ungrant(*connState) { h.n-- }
func (h *http2Conn) exclusive() bool    { return false }
func (h *http2Conn) streams() int       { return h.n }

func (h *http2Conn) released(ctx actor.Context, r *Route, _ *connState, _ *Released) {
	h.n--
	r.availableH2(ctx, h, r.clock())
}

func (h *http2Conn) available(ctx actor.Context, r *Route, _ *connState, now time.Time) {
	r.availableH2(ctx, h, now) // sheds too, once no stream is left on it
}
