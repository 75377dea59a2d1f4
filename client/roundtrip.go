package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/net/http/httpguts"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
	"github.com/connactor/connactor/telemetry"
)

// RoundTrip sends req on a pooled connection and returns the response as soon as
// its head is read; the body streams from the connection, which returns to the
// pool when the body is read to EOF or closed. Any status, 4xx and 5xx included,
// is a response; transport failures are errors (see errors.go). It blocks until
// the head arrives, req's context ends, or Config.LeaseTimeout passes while
// waiting for a connection. A request that fails on a re-used connection before
// any response byte is retried once on a new connection when replaying it is
// safe (see replayable). Errors say whether the request may have reached the
// server (see errors.go). A body that is neither read to EOF nor closed holds
// its connection: Stats counts it as leased. Safe for concurrent use.
//
// Per request it sends three messages: a lease to the route actor (answered on
// a buffered channel), the exchange to the connection actor (run on this
// goroutine by its synchronized dispatcher) and a release to the route.
func (c *Client) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := validate(req); err != nil {
		closeBody(req)
		return nil, notSent(err)
	}
	if c.closing.Load() {
		closeBody(req)
		return nil, ErrClosed
	}
	ctx := req.Context()
	key, err := route.FromRequest(req, IdentityFrom(ctx), c.routeOpt)
	if err != nil {
		closeBody(req)
		return nil, notSent(fmt.Errorf("connactor: %w", err))
	}
	// The span covers admission, the lease and the exchange; out is req, or a
	// copy carrying the propagator's headers.
	out, tel := c.tel.StartRequest(ctx, req, key.Scheme, key.Host, key.Port)
	if err := c.admit(ctx); err != nil {
		closeBody(req)
		c.failed(tel, err)
		return nil, err
	}
	resp, err := c.roundTrip(ctx, out, key, tel)
	if err != nil {
		c.unadmit()
		c.failed(tel, err)
		return nil, err
	}
	resp.Request = req
	tel.Responded(resp)
	return resp, nil
}

func (c *Client) failed(tel *telemetry.Request, err error) {
	if tel != nil && errors.Is(err, ErrLeaseTimeout) {
		tel.LeaseTimedOut(c.cfg.LeaseTimeout)
	}
	tel.Failed(err)
}

func (c *Client) roundTrip(ctx context.Context, req *http.Request, key route.Key, tel *telemetry.Request) (*http.Response, error) {
	trace := httptrace.ContextClientTrace(ctx)
	cl := newCall(c, trace, tel)
	fresh := false
	for attempt := 0; ; attempt++ {
		if trace != nil && trace.GetConn != nil {
			trace.GetConn(key.Addr())
		}
		h, lease, err := c.lease(ctx, cl, key, fresh)
		if err != nil {
			cl.recycle()
			closeBody(req)
			return nil, err
		}
		if trace != nil && trace.GotConn != nil {
			trace.GotConn(httptrace.GotConnInfo{Reused: lease.Reused, WasIdle: lease.IdleTime > 0, IdleTime: lease.IdleTime})
		}
		tel.LeaseGranted(telemetry.LeaseInfo{Waited: lease.Waited, QueuePos: lease.QueuePos, Reused: lease.Reused,
			IdleTime: lease.IdleTime, Dial: lease.Dial.Took, Connect: lease.Dial.Connect, TLS: lease.Dial.TLS})
		cl.route, cl.release = h.PID, lease.Release
		cl.ex.Req, cl.ex.Reused = req, lease.Reused
		// Two owners from here on: this goroutine until it has read the answer,
		// and Done, which may run first (a response without a body ends the
		// exchange before it is answered).
		cl.owners.Store(2)
		c.sys.Root.Send(lease.Conn, &cl.ex)
		var ex conn.ExchangeResponse
		select {
		case ex = <-cl.exReply:
		case <-c.closedCh:
			// The connection was aborted under the exchange; its answer follows,
			// unless the connection actor stopped before it saw the request
			// (protoactor drops mail that reaches a stopped actor).
			select {
			case ex = <-cl.exReply:
			case <-c.stoppedCh:
				select {
				case ex = <-cl.exReply:
				default:
					cl.lost = true // never answered: not recycled
					ex.Err = &conn.ExchangeError{Op: "write", Reused: lease.Reused, Err: ErrClosed}
				}
			}
		}
		if ex.Err == nil {
			cl.disown() // cl.released ends the request when the body ends
			return ex.Resp, nil
		}
		cl.release.Reusable, cl.release.Idle = false, 0
		c.sys.Root.Send(cl.route, cl.release)
		if attempt == 0 && lease.Reused {
			if next, ok := replayable(req, ex.Err); ok && retryAllowed(ctx, ex.Err) {
				tel.Retry(ex.Err)
				req, fresh = next, true
				continue
			}
		}
		cl.recycle()
		closeBody(req)
		if ctx.Err() != nil && !errors.Is(ex.Err, ctx.Err()) {
			return nil, fmt.Errorf("%w: %w", ctx.Err(), ex.Err)
		}
		return nil, ex.Err
	}
}

// call holds one request's messages to the actors and their reply channels.
// Requests recycle calls (a sync.Pool), which saves five allocations per
// request: a call goes back to the pool only once no actor can read or answer
// it any more (its lease answered, its exchange over), and never after Close
// cut a wait short. The Release message is the connection's own (see
// actors.Lease), never the call's: the route may still be reading it.
type call struct {
	c          *Client
	lease      actors.LeaseRequest
	leaseReply chan actors.LeaseResponse
	ex         conn.ExchangeRequest
	exReply    chan conn.ExchangeResponse

	trace   *httptrace.ClientTrace
	tel     *telemetry.Request
	route   *actor.PID
	release *actors.Release // the lease's (see actors.Lease)
	lost    bool            // an actor may still answer: do not recycle
	owners  atomic.Int32    // during an exchange that answered: the caller and Done
}

var calls sync.Pool // of *call; New is set in init (call.recycle refers to calls)

func init() {
	calls.New = func() any {
		cl := &call{leaseReply: make(chan actors.LeaseResponse, 1), exReply: make(chan conn.ExchangeResponse, 1)}
		cl.lease.Reply = cl.leaseReply
		cl.ex.Reply = cl.exReply
		cl.ex.Done = cl.released // bound once per call, not once per request
		return cl
	}
}

func newCall(c *Client, trace *httptrace.ClientTrace, tel *telemetry.Request) *call {
	cl := calls.Get().(*call)
	cl.c, cl.trace, cl.tel = c, trace, tel
	cl.lease.Trace = trace
	return cl
}

// released is the exchange's Done: the body reached its end or was closed. It
// returns the connection to its route actor and ends the request.
func (cl *call) released(reusable bool, idle time.Duration) {
	c := cl.c
	if reusable && cl.trace != nil && cl.trace.PutIdleConn != nil {
		cl.trace.PutIdleConn(nil)
	}
	cl.release.Reusable, cl.release.Idle = reusable, idle
	c.sys.Root.Send(cl.route, cl.release)
	c.unadmit()
	cl.tel.ExchangeDone()
	cl.disown()
}

// disown gives up one owner's hold on the call; the last one recycles it.
func (cl *call) disown() {
	if cl.owners.Add(-1) == 0 {
		cl.recycle()
	}
}

func (cl *call) recycle() {
	if cl.lost {
		return
	}
	done := cl.ex.Done
	cl.c, cl.trace, cl.tel, cl.route, cl.release = nil, nil, nil, nil, nil
	cl.lease = actors.LeaseRequest{Reply: cl.leaseReply}
	cl.ex = conn.ExchangeRequest{Reply: cl.exReply, Done: done}
	calls.Put(cl)
}

// lease obtains a connection of route key from its route actor, waiting in the
// route's FIFO queue if need be. A caller that gives up (context, LeaseTimeout,
// Close) sends a LeaseCancel; a grant that crossed it is returned to the pool.
func (c *Client) lease(ctx context.Context, cl *call, key route.Key, fresh bool) (*actors.RouteHandle, actors.Lease, error) {
	var timeout <-chan time.Time
	if c.cfg.LeaseTimeout > 0 {
		t := time.NewTimer(c.cfg.LeaseTimeout)
		defer t.Stop()
		timeout = t.C
	}
	for tries := 0; ; tries++ {
		h, err := c.routeHandle(ctx, key)
		if err != nil {
			return nil, actors.Lease{}, err
		}
		id := c.nextID.Add(1)
		cl.lease.ID, cl.lease.Fresh = id, fresh
		reply := cl.leaseReply
		c.sys.Root.Send(h.PID, &cl.lease)
		var cancelErr error
		var r actors.LeaseResponse
		select {
		case r = <-reply:
		case <-ctx.Done():
			cancelErr = notSent(ctx.Err())
		case <-timeout:
			cancelErr = notSent(fmt.Errorf("%w after %v on %s", ErrLeaseTimeout, c.cfg.LeaseTimeout, key))
		case <-c.closedCh:
			cl.lost = true
			return nil, actors.Lease{}, ErrClosed
		}
		if cancelErr != nil {
			c.sys.Root.Send(h.PID, &actors.LeaseCancel{ID: id, Err: cancelErr})
			var ok bool
			if r, ok = c.awaitCancelled(h, reply); !ok {
				cl.lost = true
				if c.isClosed() {
					return nil, actors.Lease{}, ErrClosed
				}
				return nil, actors.Lease{}, cancelErr
			}
			if r.Err == nil {
				// Served just as we gave up: the connection goes back untouched.
				rel := r.Lease.Release
				rel.Reusable, rel.Idle = true, 0
				c.sys.Root.Send(h.PID, rel)
			}
			return nil, actors.Lease{}, cancelErr
		}
		if errors.Is(r.Err, actors.ErrRouteClosed) {
			if c.closing.Load() && c.isClosed() {
				return nil, actors.Lease{}, ErrClosed
			}
			c.routes.CompareAndDelete(key, h)
			if tries < 3 {
				continue // the route actor stopped (it failed): a new one is started
			}
			return nil, actors.Lease{}, notSent(fmt.Errorf("connactor: route %s keeps failing: %w", key, r.Err))
		}
		if r.Err != nil {
			return nil, actors.Lease{}, &ExchangeError{Op: "dial", Err: fmt.Errorf("%s: %w", key, r.Err)}
		}
		return h, r.Lease, nil
	}
}

// awaitCancelled waits for the one answer a cancelled LeaseRequest still gets.
// It gives up (false) when the client closes or the route actor has stopped: a
// route that stopped after a panic never answers the requests that were still in
// its mailbox (protoactor drops them), and nothing else would end this wait.
func (c *Client) awaitCancelled(h *actors.RouteHandle, reply chan actors.LeaseResponse) (actors.LeaseResponse, bool) {
	select {
	case r := <-reply:
		return r, true
	default:
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r := <-reply:
			return r, true
		case <-c.closedCh:
			return actors.LeaseResponse{}, false
		case <-tick.C:
			if h.Pub.Stopped.Load() {
				select {
				case r := <-reply:
					return r, true
				default:
					return actors.LeaseResponse{}, false
				}
			}
		}
	}
}

// routeHandle returns the route actor of key, asking the supervisor on first use.
func (c *Client) routeHandle(ctx context.Context, key route.Key) (*actors.RouteHandle, error) {
	if v, ok := c.routes.Load(key); ok {
		h := v.(*actors.RouteHandle)
		if !h.Pub.Stopped.Load() {
			return h, nil
		}
		c.routes.CompareAndDelete(key, h)
	}
	reply := make(chan actors.RouteResponse, 1)
	c.sys.Root.Send(c.sup, &actors.RouteRequest{Key: key, Reply: reply})
	select {
	case r := <-reply:
		if r.Err != nil {
			return nil, ErrClosed
		}
		c.routes.Store(key, r.Route)
		return r.Route, nil
	case <-ctx.Done():
		return nil, notSent(ctx.Err())
	case <-c.closedCh:
		return nil, ErrClosed
	}
}

// admit takes one of MaxConcurrentRequests: an atomic on the fast path, the
// supervisor's FIFO queue when the limit is reached.
func (c *Client) admit(ctx context.Context) error {
	if c.pub.TryAdmit(int64(c.cfg.MaxConcurrentRequests)) {
		return nil
	}
	id := c.nextID.Add(1)
	reply := make(chan error, 1)
	c.sys.Root.Send(c.sup, &actors.AdmitRequest{ID: id, Reply: reply})
	var timeout <-chan time.Time
	if c.cfg.LeaseTimeout > 0 {
		t := time.NewTimer(c.cfg.LeaseTimeout)
		defer t.Stop()
		timeout = t.C
	}
	var cancelErr error
	select {
	case err := <-reply:
		if err != nil {
			return ErrClosed
		}
		return nil
	case <-ctx.Done():
		cancelErr = notSent(ctx.Err())
	case <-timeout:
		cancelErr = notSent(fmt.Errorf("%w after %v waiting for admission (MaxConcurrentRequests %d)", ErrLeaseTimeout, c.cfg.LeaseTimeout, c.cfg.MaxConcurrentRequests))
	case <-c.closedCh:
		return ErrClosed
	}
	c.sys.Root.Send(c.sup, &actors.AdmitCancel{ID: id, Err: cancelErr})
	select {
	case err := <-reply:
		if err == nil {
			c.unadmit() // admitted just as we gave up
		}
	case <-c.closedCh:
	}
	return cancelErr
}

func (c *Client) unadmit() {
	if c.pub.Unadmit() {
		c.sys.Root.Send(c.sup, &actors.AdmitWake{})
	}
}

// validate refuses, before anything is written, requests net/http's writer would
// send mangled or that would allow header injection.
func validate(req *http.Request) error {
	if req == nil {
		return fmt.Errorf("%w: nil request", ErrInvalidRequest)
	}
	if req.URL == nil {
		return fmt.Errorf("%w: nil URL", ErrInvalidRequest)
	}
	if req.Method != "" && !validMethod(req.Method) {
		return fmt.Errorf("%w: invalid method %q", ErrInvalidRequest, req.Method)
	}
	if req.Host != "" && !httpguts.ValidHostHeader(req.Host) {
		return fmt.Errorf("%w: invalid Host %q", ErrInvalidRequest, req.Host)
	}
	for _, h := range []http.Header{req.Header, req.Trailer} {
		for k, vv := range h {
			if !httpguts.ValidHeaderFieldName(k) {
				return fmt.Errorf("%w: invalid header name %q", ErrInvalidRequest, k)
			}
			for _, v := range vv {
				if !httpguts.ValidHeaderFieldValue(v) {
					return fmt.Errorf("%w: invalid value for header %q", ErrInvalidRequest, k)
				}
			}
		}
	}
	return nil
}

func validMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		if !httpguts.IsTokenRune(rune(m[i])) {
			return false
		}
	}
	return true
}

func closeBody(req *http.Request) {
	if req != nil && req.Body != nil {
		req.Body.Close()
	}
}

var _ io.Closer = (*Client)(nil)
