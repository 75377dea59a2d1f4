package actors

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
	"github.com/connactor/connactor/telemetry"
)

// Exchange is one attempt of one request: its lease, its exchange with the
// connection and its release. One allocation holds the messages and the
// tickets; none of them is changed after it is sent. Call.Lease makes it;
// the caller's goroutine runs it.
type Exchange struct {
	p     *Pool
	tel   *telemetry.Request
	trace *httptrace.ClientTrace
	route *routeHandle
	got   Lease
	early error // the response arrived before the body was sent in full (conn.ErrEarlyResponse)
	gzip  bool  // send "Accept-Encoding: gzip" (transparent compression, pool_gzip.go)

	// ending decides, once, between the end of the exchange (done) and the
	// caller giving up on the connection's answer because the route stopped
	// (answer): whichever comes first releases what the request holds.
	ending atomic.Int32

	ticket   wait.Ticket[Lease]
	leaseReq LeaseRequest
	exReq    conn.ExchangeRequest
	exReply  wait.Ticket[conn.ExchangeResponse]
	released Released
}

// Lease obtains a connection of the call's route (or a stream of an HTTP/2
// one, not avoid), waiting in the route's FIFO queue if need be. fresh asks
// for a connection that has served no request (the replay after a stale one).
func (l *Call) Lease(fresh bool, avoid uint64) (*Exchange, error) {
	p, key := l.p, l.key
	x := &Exchange{p: p, tel: l.tel, trace: l.trace, gzip: l.gzip}
	if x.trace != nil && x.trace.GetConn != nil {
		x.trace.GetConn(key.Addr())
	}
	h, err := l.routeFor()
	if err != nil {
		return nil, err
	}
	x.route = h
	x.leaseReq = LeaseRequest{Ticket: &x.ticket, Fresh: fresh, Trace: x.trace, Avoid: avoid}
	p.sys.Root.Send(h.PID, &x.leaseReq)
	lease, err, why := await(l, &x.ticket, h.Done)
	switch {
	case why == byServerGone || errors.Is(err, ErrRouteClosed):
		if p.closing.Load() {
			return nil, ErrClosed
		}
		p.routes.CompareAndDelete(key, h)
		return nil, NotSent(fmt.Errorf("connactor: %w: %s, while waiting for a connection for %s", ErrRouteFailed, key, l.target()))
	case why != served:
		// The route drops the waiter, and takes back a lease that crossed the
		// cancel (Ticket.Returned).
		p.sys.Root.Send(h.PID, &LeaseCancelled{Ticket: &x.ticket, TimedOut: why == byTimeout})
		return nil, l.waitErr(why, "a connection")
	case errors.Is(err, ErrQueueFull):
		return nil, fmt.Errorf("%w: %d callers already wait on %s (MaxPendingPerRoute) for %s",
			ErrQueueFull, p.cfg.MaxPendingPerRoute, key, l.target())
	case errors.Is(err, ErrRouteUnavailable):
		return nil, &wrapped{err: fmt.Errorf("%w: %s, for %s", ErrRouteUnavailable, key, l.target()), cause: err}
	case err != nil:
		return nil, dialError(key, err)
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
	return x, nil
}

// dialError is the error of a lease whose connection could not be dialed. A
// certificate that does not verify is returned as the
// *tls.CertificateVerificationError itself, as net/http does, so that code
// type-switching on url.Error.Err sees it (go-retryablehttp does, and stops
// retrying); every other dial failure is an *ExchangeError (Op "dial") naming
// the route, with ErrNotSent.
func dialError(key route.Key, err error) error {
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		return cv
	}
	return &ExchangeError{Op: "dial", Err: fmt.Errorf("%s: %w", key, err)}
}

// GiveBack returns the lease unused: its request was given up (aborted)
// after the lease was granted and before anything was written. The route
// takes the connection back as it came (Ticket.Returned), and no Released
// follows.
func (x *Exchange) GiveBack() {
	x.ticket.Cancel()
	x.p.sys.Root.Send(x.route.PID, &LeaseCancelled{Ticket: &x.ticket})
}

// ConnID is the leased connection's ID (an Avoid for the next attempt).
func (x *Exchange) ConnID() uint64 { return x.got.ConnID }

// Early is non-nil when the response arrived before the request body was
// sent in full (ErrEarlyResponse): the server answered early, and the
// connection is not re-used.
func (x *Exchange) Early() error { return x.early }

// RoundTrip sends req on the leased connection and waits for the response
// head. The connection actor runs the exchange on this goroutine and answers
// (through the exchange's ticket) before Send returns, unless its mailbox was
// busy; a connection actor stopped with its route before it saw the request
// never answers, which the route's Done tells. On success the response's body
// holds the lease (and the call's admission) until it is read to its end or
// closed; on failure the lease is released.
func (x *Exchange) RoundTrip(req *http.Request) (*http.Response, error) {
	var resp *http.Response
	var err error
	if x.got.H2 != nil {
		resp, err = x.stream(req)
	} else {
		resp, err = x.exchange(req)
	}
	if err == nil && x.gzip {
		gunzip(resp)
	}
	return resp, err
}

func (x *Exchange) exchange(req *http.Request) (*http.Response, error) {
	x.exReq = conn.ExchangeRequest{ConnID: x.got.ConnID, Req: req, Reused: x.got.Reused, AcceptGzip: x.gzip, Reply: &x.exReply, Done: x}
	x.p.sys.Root.Send(x.got.Conn, &x.exReq)
	r, _, ok := x.exReply.Result()
	if !ok {
		select {
		case <-x.exReply.Ready():
		case <-x.route.Done:
		}
		r = x.answer()
	}
	if r.Err != nil {
		x.release(Released{Stale: errors.Is(r.Err, conn.ErrStaleConn), Failed: errors.Is(r.Err, conn.ErrConnActorFailed)})
		return nil, r.Err
	}
	if r.Resp.TLS == nil {
		r.Resp.TLS = x.got.TLSState
	}
	x.early = r.Early
	return r.Resp, nil
}

// Values of Exchange.ending.
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
func (x *Exchange) answer() conn.ExchangeResponse {
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
	return conn.ExchangeResponse{Err: &conn.ExchangeError{Op: "write", Reused: x.got.Reused, Err: ErrRouteFailed}}
}

// stream sends req on a stream of the leased HTTP/2 connection, on this
// goroutine: the connection's own read loop delivers the response head. The
// lease is released when the stream is over (StreamEnded), or at once when it
// failed.
func (x *Exchange) stream(req *http.Request) (*http.Response, error) {
	if x.gzip {
		req = withGzip(req)
	}
	resp, err := x.got.H2.RoundTrip(req, x) // x is the stream's h2.Ender (StreamEnded)
	if err != nil {
		x.release(Released{Reusable: true}) // the stream is over; the connection reports its own fate
		return nil, err
	}
	return resp, nil
}

// StreamEnded is the exchange's h2.Ender: its HTTP/2 stream's body reached
// its end, was closed, or failed.
func (x *Exchange) StreamEnded(error) { x.done(true, 0) }

// ExchangeEnded is the exchange's conn.Ender (see done).
func (x *Exchange) ExchangeEnded(reusable bool, idle time.Duration) { x.done(reusable, idle) }

// done ends the exchange: the response body reached its end or was closed.
// The connection goes back to its route and the request ends, unless the
// caller gave up on the answer (see answer), whose error path ends the request.
func (x *Exchange) done(reusable bool, idle time.Duration) {
	if !x.ending.CompareAndSwap(exchanging, ended) {
		return
	}
	if reusable && x.trace != nil && x.trace.PutIdleConn != nil {
		x.trace.PutIdleConn(nil)
	}
	x.release(Released{Reusable: reusable, Idle: idle})
	x.p.admission.Release()
	x.tel.ExchangeDone()
}

// release sends the lease's one Released: m, for the lease's connection.
func (x *Exchange) release(m Released) {
	m.ConnID = x.got.ConnID
	x.released = m
	x.p.sys.Root.Send(x.route.PID, &x.released)
}
