package actors

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/conn/h2"
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
	// foreign: its caller is in a testing/synctest bubble the pool is not
	// in (Call.foreign); its messages to the route go from the pool's home.
	foreign bool

	ticket   wait.Ticket[Lease]
	leaseReq LeaseRequest
	exReq    conn.ExchangeRequest
	exReply  wait.Ticket[conn.ExchangeResponse]
	released Released
	h2body   h2.Body // the response body of its HTTP/2 stream (stream)
	// failed says the response head was a 5xx (ExchangeFailed), written by
	// the goroutine that saw the head (sawHead). The exchange can end (done)
	// before that goroutine has the head (a response without a body ends on
	// the connection's side first, and the connection may run on another
	// goroutine): order says which came first, and the second sends the
	// Released, so that it carries the head's outcome.
	failed bool
	order  atomic.Uint32 // 0, headFirst or endedFirst

	// sample is the exchange's latency sample for its route's adaptive
	// limit and hedge delay (Released): measured on the caller's goroutine,
	// sent with the release.
	sample latencySample

	// Hedging (pool_hedge.go). An attempt of a hedged request has its own
	// context, whose cancel it calls when its exchange ends; hedged says it
	// is a hedge (not the request's first attempt); quiet says it has not won
	// (yet): its end tells the request's telemetry nothing, and endedQuiet
	// records that it ended meanwhile, for the winner whose exchange ended
	// before it won.
	cancel     context.CancelFunc
	hedged     bool
	unwritten  bool // its exchange failed before anything was written: a hedge not sent
	quiet      bool
	endedQuiet bool
}

// What came first of an exchange's head and its end (Exchange.order).
const (
	headFirst  = 1
	endedFirst = 2
)

// sawHead records the response head's outcome for the Released, and sends
// the Released if the exchange already ended (done came first). The head's
// time is in the sample already (headed).
func (x *Exchange) sawHead(resp *http.Response) {
	x.failed = headFailed(resp)
	if !x.order.CompareAndSwap(0, headFirst) {
		x.released.ExchangeFailed = x.released.ExchangeFailed || x.failed // its body's failure, or its head's
		x.released.latencySample = x.sample
		x.post(&x.released)
	}
}

// Lease obtains a connection of the call's route (or a stream of an HTTP/2
// one, not avoid), waiting in the route's FIFO queue if need be. fresh asks
// for a connection that has served no request (the replay after a stale one).
// It first tries the route's outbox (an idle connection on offer, taken
// without a message: see route_outbox.go), unless fresh or avoid rule a
// re-used connection out; then it asks the route (a LeaseRequest).
func (l *Call) Lease(fresh bool, avoid uint64) (*Exchange, error) {
	p, key := l.p, l.key
	if l.trace != nil && l.trace.GetConn != nil {
		l.trace.GetConn(key.Addr())
	}
	x, lease, why, err := l.leaseOnRoute(fresh, avoid)
	if x == nil {
		return nil, err
	}
	h := x.route
	switch {
	case why != served:
		// The route drops the waiter, and takes back a lease that crossed the
		// cancel (Ticket.Returned).
		x.post(&LeaseCancelled{Ticket: &x.ticket, TimedOut: why == byTimeout})
		return nil, l.waitErr(why, "a connection")
	case errors.Is(err, ErrRouteClosed): // the route stopped: its Stopping or its mailbox said so
		if p.closing.Load() {
			return nil, ErrClosed
		}
		p.forgetRoute(h)
		return nil, NotSent(fmt.Errorf("connactor: %w: %s, while waiting for a connection for %s", ErrRouteFailed, key, l.target()))
	case errors.Is(err, ErrQueueFull):
		return nil, fmt.Errorf("%w: %d callers already wait on %s (MaxPendingPerRoute) for %s",
			ErrQueueFull, p.cfg.MaxPendingPerRoute, key, l.target())
	case errors.Is(err, ErrOverloaded):
		return nil, fmt.Errorf("%w: waited longer than QueueTarget (%v) on %s while its queue stood, for %s",
			ErrOverloaded, p.cfg.QueueTarget, key, l.target())
	case errors.Is(err, ErrRouteUnavailable):
		return nil, &wrapped{err: fmt.Errorf("%w: %s, for %s", ErrRouteUnavailable, key, l.target()), cause: err}
	case err != nil:
		return nil, dialError(key, err)
	}
	return x.leased(lease), nil
}

// leased records the lease the exchange got, for its caller's httptrace and
// telemetry (the lease's wait in the route's histogram: on the caller's
// goroutine, not in the route's Receive).
func (x *Exchange) leased(lease Lease) *Exchange {
	x.got = lease
	x.route.tel.LeaseGranted(lease.Waited)
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
	return x
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
	x.post(&LeaseCancelled{Ticket: &x.ticket})
}

// ConnID is the leased connection's ID (an Avoid for the next attempt).
func (x *Exchange) ConnID() uint64 { return x.got.ConnID }

// Early is non-nil when the response arrived before the request body was
// sent in full (ErrEarlyResponse): the server answered early, and the
// connection is not re-used.
func (x *Exchange) Early() error { return x.early }

// RoundTrip sends req on the leased connection and waits for the response
// head. The connection actor runs the exchange on this goroutine and answers
// (through the exchange's ticket) before the post returns, unless its mailbox
// was busy; one that stopped before it saw the request (with its route, say)
// has it answered by its mailbox. On success the response's body holds the
// lease (and the call's admission) until it is read to its end or closed; on
// failure the lease is released.
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
	x.writing()
	x.got.Inbox.PostUserMessage(&x.exReq)
	r, _, ok := x.exReply.Result()
	if !ok {
		<-readyOf(x.p, x.foreign, &x.exReply) // the connection actor, or its mailbox, answers
		r, _, _ = x.exReply.Result()
	}
	x.headed(req, r.Err)
	if r.Err != nil {
		var ee *conn.ExchangeError
		x.unwritten = errors.As(r.Err, &ee) && !ee.Written
		x.release(Released{Stale: errors.Is(r.Err, conn.ErrStaleConn), Failed: errors.Is(r.Err, conn.ErrConnActorFailed),
			ExchangeFailed: exchangeFailed(r.Err)})
		return nil, r.Err
	}
	if r.Resp.TLS == nil {
		r.Resp.TLS = x.got.TLSState
	}
	x.early = r.Early
	x.sawHead(r.Resp)
	return r.Resp, nil
}

// stream sends req on a stream of the leased HTTP/2 connection, on this
// goroutine: the connection's own read loop delivers the response head. The
// lease is released when the stream is over (StreamEnded), or at once when it
// failed. The response body's wrapper is the exchange's own (h2body): no
// allocation per stream beside the exchange.
func (x *Exchange) stream(req *http.Request) (*http.Response, error) {
	if x.gzip {
		req = withGzip(req)
	}
	x.writing()
	var resp *http.Response
	var err error
	if x.foreign {
		resp, err = x.got.H2.RoundTripAt(x.p.home, req, x, &x.h2body)
	} else {
		resp, err = x.got.H2.RoundTripBody(req, x, &x.h2body) // x is the stream's h2.Ender (StreamEnded)
	}
	x.headed(req, err)
	if err != nil {
		// The stream is over; the connection reports its own fate.
		x.release(Released{Reusable: true, ExchangeFailed: exchangeFailed(err)})
		return nil, err
	}
	x.sawHead(resp)
	return resp, nil
}

// StreamEnded is the exchange's h2.Ender: its HTTP/2 stream's body reached
// its end, was closed, or failed (err: see bodyFailed).
func (x *Exchange) StreamEnded(err error) { x.done(true, 0, bodyFailed(err)) }

// ExchangeEnded is the exchange's conn.Ender (see done).
func (x *Exchange) ExchangeEnded(reusable bool, idle time.Duration, failure error) {
	x.done(reusable, idle, failure != nil)
}

// done ends the exchange: the response body reached its end or was closed,
// or it failed on the server's side (failed: it counts as a failed
// exchange, as a 5xx head does). The connection goes back to its route and
// the request ends.
func (x *Exchange) done(reusable bool, idle time.Duration, failed bool) {
	if reusable && x.trace != nil && x.trace.PutIdleConn != nil {
		x.trace.PutIdleConn(nil)
	}
	// Before the head's goroutine has it, sawHead sends this Released, with
	// the head's outcome and the latency sample; after, it is sent here.
	x.released = Released{ConnID: x.got.ConnID, Reusable: reusable, Idle: idle, Hedge: x.hedged, Unsent: x.unwritten,
		ExchangeFailed: failed}
	if !x.order.CompareAndSwap(0, endedFirst) {
		x.released.ExchangeFailed = failed || x.failed
		x.released.latencySample = x.sample
		x.post(&x.released)
	}
	x.p.admission.Release()
	// The attempt's own context, whose exchange is over. A bubbled caller's
	// was made in its bubble: an end told outside it (a connection actor
	// busy when the exchange came ran it on its own goroutine) leaves it to
	// the request's context, as closing it there would kill the process.
	if x.cancel != nil && (!x.foreign || wait.Bubbled(time.Now())) {
		x.cancel()
	}
	if x.quiet {
		x.endedQuiet = true // a hedged request's attempt that has not won: the race tells the telemetry
		return
	}
	x.tel.ExchangeDone()
}

// writing notes when the exchange's write begins, for a route that measures
// its latency (an adaptive limit, or a measured hedge delay): its sample's
// Written.
func (x *Exchange) writing() {
	if x.p.measure {
		x.sample = latencySample{Written: x.p.now(), InFlight: x.got.InFlight}
	}
}

// headed notes when the exchange's response head arrived (err nil), or that
// its caller's deadline ended it before: the sample's Head, or its TimedOut.
// Any other failure teaches the route nothing.
func (x *Exchange) headed(req *http.Request, err error) {
	switch {
	case x.sample.Written.IsZero():
	case err == nil:
		x.sample.Head = x.p.now()
	case errors.Is(req.Context().Err(), context.DeadlineExceeded):
		x.sample.Head, x.sample.TimedOut = x.p.now(), true
	default:
		x.sample = latencySample{}
	}
}

// release sends the lease's one Released: m, for the lease's connection,
// with the exchange's latency sample.
func (x *Exchange) release(m Released) {
	m.ConnID, m.Hedge, m.Unsent = x.got.ConnID, x.hedged, x.unwritten
	m.latencySample = x.sample
	x.released = m
	x.post(&x.released)
}

// post sends m to the exchange's route: from the pool's home when the
// caller is foreign (postFrom). The common case is a direct call.
func (x *Exchange) post(m any) {
	if x.foreign {
		postFrom(x.p, true, x.route.mb, m)
		return
	}
	x.route.post(m)
}
