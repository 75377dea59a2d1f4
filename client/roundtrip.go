package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"time"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
	"github.com/connactor/connactor/telemetry"
)

// RoundTrip sends req on a pooled connection and returns the response as soon as
// its head is read; the body streams from the connection, which returns to the
// pool when the body is read to EOF or closed. Any status, 4xx and 5xx included,
// is a response; transport failures are errors (see ErrNotSent). It blocks until
// the head arrives, req's context ends, or Config.LeaseTimeout passes while
// waiting for a connection. A request that fails on a re-used connection before
// any response byte is retried once on a new connection when replaying it is
// safe: an idempotent method, or a body it can get again (GetBody). A body that is neither read to EOF nor closed holds its
// connection: Stats counts it as leased. Safe for concurrent use.
//
// The life of a request: admission (a FIFO semaphore, an atomic while under
// MaxConcurrentRequests); a LeaseRequest to the route actor, answered through
// its ticket; an ExchangeRequest to the connection actor, run on this
// goroutine; and, when the body ends, a Released to the route actor.
func (c *Client) RoundTrip(req *http.Request) (*http.Response, error) {
	return c.roundTrip(req, nil)
}

// roundTrip is RoundTrip with a retry hook: before replaying a request that
// failed on a re-used connection it asks retry (nil = always replay). Send's
// Handles use it to let their handler refuse the replay.
func (c *Client) roundTrip(req *http.Request, retry func(error) bool) (*http.Response, error) {
	key, err := c.check(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	c.budget.request()
	// The span covers admission, the lease and the exchange; out is req, or a
	// copy carrying the propagator's headers.
	out, tel := c.tel.StartRequest(ctx, req, key.Scheme, key.Host, key.Port)
	out, gz := c.withGzip(out)
	lim := waitLimit{ctx: ctx, c: c, req: req, timeout: c.cfg.LeaseTimeout}
	defer lim.stop()
	if err := c.admit(&lim); err != nil {
		closeBody(req)
		c.failed(tel, err)
		return nil, err
	}
	resp, err := c.send(&lim, out, key, tel, retry)
	if err != nil {
		c.admission.Release()
		c.failed(tel, err)
		return nil, err
	}
	resp.Request = req
	if gz {
		gunzip(resp)
	}
	tel.Responded(resp)
	return resp, nil
}

// check refuses, before anything is written, requests this client cannot send.
func (c *Client) check(req *http.Request) (route.Key, error) {
	if err := validate(req); err != nil {
		return route.Key{}, notSent(err)
	}
	if c.closing.Load() {
		return route.Key{}, ErrClosed
	}
	key, err := route.FromRequest(req, IdentityFrom(req.Context()), c.routeOpt)
	if err != nil {
		return route.Key{}, notSent(err)
	}
	return key, nil
}

func (c *Client) failed(tel *telemetry.Request, err error) {
	if tel != nil && errors.Is(err, ErrLeaseTimeout) {
		tel.LeaseTimedOut(c.cfg.LeaseTimeout)
	}
	tel.Failed(err)
}

// admit takes one of MaxConcurrentRequests: an atomic while there is room and
// nobody queues, the semaphore's FIFO otherwise.
func (c *Client) admit(l *waitLimit) error {
	if c.admission.TryAcquire() {
		return nil
	}
	t := &wait.Ticket[struct{}]{}
	c.admission.Enqueue(t)
	if _, _, why := await(l, t, nil); why != served {
		c.admission.Cancel(t) // an admission that crossed the cancel goes back
		return l.waitErr(why, "admission (MaxConcurrentRequests)")
	}
	return nil
}

// send leases a connection and exchanges req on it, replaying it once on a
// fresh connection when it failed on a re-used one and replaying is safe.
func (c *Client) send(l *waitLimit, req *http.Request, key route.Key, tel *telemetry.Request, retry func(error) bool) (*http.Response, error) {
	trace := httptrace.ContextClientTrace(l.ctx)
	fresh := false
	for attempt := 0; ; attempt++ {
		x := &exchange{c: c, tel: tel, trace: trace}
		if err := x.lease(l, key, fresh); err != nil {
			closeBody(req)
			return nil, err
		}
		resp, err := x.exchange(req)
		if err == nil {
			return resp, nil
		}
		if attempt == 0 && x.got.Reused {
			if next, ok := replayable(req, err); ok {
				if !c.budget.allow() {
					tel.RetryRefused(err)
				} else if retry == nil || retry(err) {
					tel.Retry(err)
					req, fresh = next, true
					continue
				}
			}
		}
		closeBody(req)
		if ctxErr := l.ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			return nil, fmt.Errorf("%w: %w", ctxErr, err)
		}
		return nil, err
	}
}

// exchange is one attempt of one request: its lease, its exchange with the
// connection actor and its release. One allocation holds the messages and the
// ticket; none of them is changed after it is sent.
type exchange struct {
	c     *Client
	tel   *telemetry.Request
	trace *httptrace.ClientTrace
	route *actors.RouteHandle
	got   actors.Lease

	ticket   wait.Ticket[actors.Lease]
	leaseReq actors.LeaseRequest
	exReq    conn.ExchangeRequest
	released actors.Released
}

// lease obtains a connection of route key, waiting in the route's FIFO queue if
// need be.
func (x *exchange) lease(l *waitLimit, key route.Key, fresh bool) error {
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
	x.leaseReq = actors.LeaseRequest{Ticket: &x.ticket, Fresh: fresh, Trace: x.trace}
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
		x.trace.GotConn(httptrace.GotConnInfo{Reused: lease.Reused, WasIdle: lease.IdleTime > 0, IdleTime: lease.IdleTime})
	}
	x.tel.LeaseGranted(telemetry.LeaseInfo{Waited: lease.Waited, QueuePos: lease.QueuePos, Reused: lease.Reused,
		IdleTime: lease.IdleTime, Dial: lease.Dial.Took, Connect: lease.Dial.Connect, TLS: lease.Dial.TLS})
	return nil
}

// exchange sends req on the leased connection and waits for the response head.
// The connection actor runs the exchange on this goroutine and answers at once,
// unless its mailbox was busy; a connection actor stopped with its route before
// it saw the request never answers, which the route's Done tells.
func (x *exchange) exchange(req *http.Request) (*http.Response, error) {
	reply := make(chan conn.ExchangeResponse, 1)
	x.exReq = conn.ExchangeRequest{Req: req, Reused: x.got.Reused, Reply: reply, Done: x.done}
	x.c.sys.Root.Send(x.got.Conn, &x.exReq)
	var r conn.ExchangeResponse
	select {
	case r = <-reply:
	case <-x.route.Done:
		// An answer sent before the connection stopped is already there.
		select {
		case r = <-reply:
		default:
			r.Err = &conn.ExchangeError{Op: "write", Reused: x.got.Reused, Err: actors.ErrRouteFailed}
		}
	}
	if r.Err != nil {
		x.release(false, errors.Is(r.Err, conn.ErrStaleConn), 0)
		return nil, r.Err
	}
	return r.Resp, nil
}

// done is the exchange's Done: the response body reached its end or was
// closed. The connection goes back to its route and the request ends.
func (x *exchange) done(reusable bool, idle time.Duration) {
	if reusable && x.trace != nil && x.trace.PutIdleConn != nil {
		x.trace.PutIdleConn(nil)
	}
	x.release(reusable, false, idle)
	x.c.admission.Release()
	x.tel.ExchangeDone()
}

// release sends the lease's one Released.
func (x *exchange) release(reusable, stale bool, idle time.Duration) {
	x.released = actors.Released{ConnID: x.got.ConnID, Reusable: reusable, Stale: stale, Idle: idle}
	x.c.sys.Root.Send(x.route.PID, &x.released)
}
