package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
	"github.com/connactor/connactor/telemetry"
)

// exchange is one attempt of one request: its lease, its exchange with the
// connection actor and its release. One allocation holds the messages and the
// ticket; none of them is changed after it is sent.
type exchange struct {
	c     *Client
	tel   *telemetry.Request
	trace *httptrace.ClientTrace
	route *actors.RouteHandle
	got   actors.Lease
	early error // the response arrived before the body was sent in full (conn.ErrEarlyResponse)
	gzip  bool  // send "Accept-Encoding: gzip" (transparent compression, gzip.go)

	// ending decides, once, between the end of the exchange (done) and the
	// caller giving up on the connection's answer because the route stopped
	// (answer): whichever comes first releases what the request holds.
	ending atomic.Int32

	ticket   wait.Ticket[actors.Lease]
	leaseReq actors.LeaseRequest
	exReq    conn.ExchangeRequest
	exReply  wait.Ticket[conn.ExchangeResponse]
	released actors.Released
}

// lease obtains a connection of route key (or a stream of an HTTP/2 one, not
// avoid), waiting in the route's FIFO queue if need be.
func (x *exchange) lease(l *waitLimit, key route.Key, fresh bool, avoid uint64) error {
	c := x.c
	if x.trace != nil && x.trace.GetConn != nil {
		x.trace.GetConn(key.Addr())
	}
	h, err := c.routeFor(l, key)
	if err != nil {
		return err
	}
	x.route = h
	x.ticket.ID = c.nextID.Add(1)
	x.leaseReq = actors.LeaseRequest{Ticket: &x.ticket, Fresh: fresh, Trace: x.trace, Avoid: avoid}
	c.sys.Root.Send(h.PID, &x.leaseReq)
	lease, err, why := await(l, &x.ticket, h.Done)
	switch {
	case why == byServerGone || errors.Is(err, actors.ErrRouteClosed):
		if c.closing.Load() {
			return ErrClosed
		}
		c.routes.CompareAndDelete(key, h)
		return notSent(fmt.Errorf("connactor: %w: %s, while waiting for a connection for %s", actors.ErrRouteFailed, key, l.target()))
	case why != served:
		// The route drops the waiter, and takes back a lease that crossed the
		// cancel (Ticket.Returned).
		c.sys.Root.Send(h.PID, &actors.LeaseCancelled{Ticket: &x.ticket, TimedOut: why == byTimeout})
		return l.waitErr(why, "a connection")
	case errors.Is(err, actors.ErrQueueFull):
		return fmt.Errorf("%w: %d callers already wait on %s (MaxPendingPerRoute) for %s",
			ErrQueueFull, c.cfg.MaxPendingPerRoute, key, l.target())
	case errors.Is(err, actors.ErrRouteUnavailable):
		return &wrapped{err: fmt.Errorf("%w: %s, for %s", ErrRouteUnavailable, key, l.target()), cause: err}
	case err != nil:
		return dialError(key, err)
	}
	x.got = lease
	if x.trace != nil && x.trace.GotConn != nil {
		x.trace.GotConn(httptrace.GotConnInfo{Conn: lease.NetConn, Reused: lease.Reused, WasIdle: lease.IdleTime > 0,
			IdleTime: lease.IdleTime})
	}
	if x.tel != nil {
		info := telemetry.LeaseInfo{Waited: lease.Waited, QueuePos: lease.QueuePos, Reused: lease.Reused,
			IdleTime: lease.IdleTime, Dial: lease.Dial.Took, Connect: lease.Dial.Connect, TLS: lease.Dial.TLS,
			HTTP2: lease.H2 != nil}
		if lease.NetConn != nil {
			info.PeerAddr = lease.NetConn.RemoteAddr()
		}
		x.tel.LeaseGranted(info)
	}
	return nil
}

// exchange sends req on the leased connection and waits for the response head.
// The connection actor runs the exchange on this goroutine and answers (through
// the exchange's ticket) before Send returns, unless its mailbox was busy; a
// connection actor stopped with its route before it saw the request never
// answers, which the route's Done tells.
func (x *exchange) exchange(req *http.Request) (*http.Response, error) {
	if x.got.H2 != nil {
		return x.stream(req)
	}
	x.exReq = conn.ExchangeRequest{ConnID: x.got.ConnID, Req: req, Reused: x.got.Reused, AcceptGzip: x.gzip, Reply: &x.exReply, Done: x}
	x.c.sys.Root.Send(x.got.Conn, &x.exReq)
	r, _, ok := x.exReply.Result()
	if !ok {
		select {
		case <-x.exReply.Ready():
		case <-x.route.Done:
		}
		r = x.answer()
	}
	if r.Err != nil {
		x.release(actors.Released{Stale: errors.Is(r.Err, conn.ErrStaleConn), Failed: errors.Is(r.Err, conn.ErrConnActorFailed)})
		return nil, r.Err
	}
	if r.Resp.TLS == nil {
		r.Resp.TLS = x.got.TLSState
	}
	x.early = r.Early
	return r.Resp, nil
}

// Values of exchange.ending.
const (
	exchanging int32 = iota
	ended            // done ran: the exchange released what it held
	abandoned        // the caller gave up on the answer: its error path releases
)

// answer returns the connection's answer once the wait for it is over: the
// answer, or, when the route stopped first, an error. An answer given before
// the connection stopped is taken; a response without a body may have ended
// its exchange already (done), in which case its answer follows at once and
// is taken too. Otherwise the caller gives up: the connection drops an answer
// that comes later, and one that crossed the cancel is discarded here.
func (x *exchange) answer() conn.ExchangeResponse {
	if r, _, ok := x.exReply.Result(); ok {
		return r
	}
	if !x.ending.CompareAndSwap(exchanging, abandoned) {
		<-x.exReply.Ready() // done ran: the answer is on its way, without a wait
		r, _, _ := x.exReply.Result()
		return r
	}
	if x.exReply.Cancel() {
		if r, ok := x.exReply.Returned(); ok && r.Resp != nil {
			r.Resp.Body.Close() // its done finds the exchange given up
		}
	}
	return conn.ExchangeResponse{Err: &conn.ExchangeError{Op: "write", Reused: x.got.Reused, Err: actors.ErrRouteFailed}}
}

// stream sends req on a stream of the leased HTTP/2 connection, on this
// goroutine: the connection's own read loop delivers the response head. The
// lease is released when the stream is over (StreamEnded), or at once when it
// failed.
func (x *exchange) stream(req *http.Request) (*http.Response, error) {
	if x.gzip {
		req = withGzip(req)
	}
	resp, err := x.got.H2.RoundTrip(req, x) // x is the stream's h2.Ender (StreamEnded)
	if err != nil {
		x.release(actors.Released{Reusable: true}) // the stream is over; the connection reports its own fate
		return nil, err
	}
	return resp, nil
}

// StreamEnded is the exchange's h2.Ender: its HTTP/2 stream's body reached
// its end, was closed, or failed.
func (x *exchange) StreamEnded(error) { x.done(true, 0) }

// ExchangeEnded is the exchange's conn.Ender (see done).
func (x *exchange) ExchangeEnded(reusable bool, idle time.Duration) { x.done(reusable, idle) }

// done ends the exchange: the response body reached its end or was closed.
// The connection goes back to its route and the request ends, unless the
// caller gave up on the answer (see answer), whose error path ends the request.
func (x *exchange) done(reusable bool, idle time.Duration) {
	if !x.ending.CompareAndSwap(exchanging, ended) {
		return
	}
	if reusable && x.trace != nil && x.trace.PutIdleConn != nil {
		x.trace.PutIdleConn(nil)
	}
	x.release(actors.Released{Reusable: reusable, Idle: idle})
	x.c.admission.Release()
	x.tel.ExchangeDone()
}

// release sends the lease's one Released: m, for the lease's connection.
func (x *exchange) release(m actors.Released) {
	m.ConnID = x.got.ConnID
	x.released = m
	x.c.sys.Root.Send(x.route.PID, &x.released)
}
