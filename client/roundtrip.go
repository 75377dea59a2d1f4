package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
)

// RoundTrip sends req on a pooled connection and returns the response as soon as
// its head is read; the body streams from the connection, which returns to the
// pool when the body is read to EOF or closed. Any status, 4xx and 5xx included,
// is a response; transport failures are errors (see errors.go). It blocks until
// the head arrives, req's context ends, or Config.LeaseTimeout passes while
// waiting for a connection. A request that fails on a re-used connection before
// any response byte is retried once on a new connection when replaying it is
// safe. Safe for concurrent use.
//
// Per request it sends three messages: a lease to the route actor (answered on
// a buffered channel), the exchange to the connection actor (run on this
// goroutine by its synchronized dispatcher) and a release to the route.
func (c *Client) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := validate(req); err != nil {
		closeBody(req)
		return nil, err
	}
	if c.closing.Load() {
		closeBody(req)
		return nil, ErrClosed
	}
	ctx := req.Context()
	key, err := route.FromRequest(req, IdentityFrom(ctx), c.routeOpt)
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("connactor: %w", err)
	}
	if err := c.admit(ctx); err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := c.roundTrip(ctx, req, key)
	if err != nil {
		c.unadmit()
		return nil, err
	}
	return resp, nil
}

func (c *Client) roundTrip(ctx context.Context, req *http.Request, key route.Key) (*http.Response, error) {
	trace := httptrace.ContextClientTrace(ctx)
	fresh := false
	for attempt := 0; ; attempt++ {
		if trace != nil && trace.GetConn != nil {
			trace.GetConn(key.Addr())
		}
		h, lease, err := c.lease(ctx, key, fresh)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		if trace != nil && trace.GotConn != nil {
			trace.GotConn(httptrace.GotConnInfo{Reused: lease.Reused, WasIdle: lease.IdleTime > 0, IdleTime: lease.IdleTime})
		}
		reply := make(chan conn.ExchangeResponse, 1)
		connID, routePID := lease.ConnID, h.PID
		c.sys.Root.Send(lease.Conn, &conn.ExchangeRequest{
			Req: req, Reused: lease.Reused, Reply: reply,
			Done: func(reusable bool, idle time.Duration) {
				if reusable && trace != nil && trace.PutIdleConn != nil {
					trace.PutIdleConn(nil)
				}
				c.sys.Root.Send(routePID, &actors.Release{ConnID: connID, Reusable: reusable, Idle: idle})
				c.unadmit()
			},
		})
		var ex conn.ExchangeResponse
		select {
		case ex = <-reply:
		case <-c.closedCh:
			// The connection was aborted under the exchange; its answer follows,
			// unless the connection actor stopped before it saw the request
			// (protoactor drops mail that reaches a stopped actor).
			select {
			case ex = <-reply:
			case <-c.stoppedCh:
				select {
				case ex = <-reply:
				default:
					ex.Err = &conn.ExchangeError{Op: "write", Reused: lease.Reused, Err: ErrClosed}
				}
			}
		}
		if ex.Err == nil {
			return ex.Resp, nil
		}
		c.sys.Root.Send(routePID, &actors.Release{ConnID: connID, Reusable: false})
		if attempt == 0 && lease.Reused {
			if next, ok := replayable(req, ex.Err); ok && retryAllowed(ctx, ex.Err) {
				req, fresh = next, true
				continue
			}
		}
		closeBody(req)
		if ctx.Err() != nil && !errors.Is(ex.Err, ctx.Err()) {
			return nil, fmt.Errorf("%w: %w", ctx.Err(), ex.Err)
		}
		return nil, ex.Err
	}
}

// lease obtains a connection of route key from its route actor, waiting in the
// route's FIFO queue if need be. A caller that gives up (context, LeaseTimeout,
// Close) sends a LeaseCancel; a grant that crossed it is returned to the pool.
func (c *Client) lease(ctx context.Context, key route.Key, fresh bool) (*actors.RouteHandle, actors.Lease, error) {
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
		reply := make(chan actors.LeaseResponse, 1)
		c.sys.Root.Send(h.PID, &actors.LeaseRequest{ID: id, Fresh: fresh, Reply: reply})
		var cancelErr error
		var r actors.LeaseResponse
		select {
		case r = <-reply:
		case <-ctx.Done():
			cancelErr = ctx.Err()
		case <-timeout:
			cancelErr = fmt.Errorf("%w after %v on %s", ErrLeaseTimeout, c.cfg.LeaseTimeout, key)
		case <-c.closedCh:
			return nil, actors.Lease{}, ErrClosed
		}
		if cancelErr != nil {
			c.sys.Root.Send(h.PID, &actors.LeaseCancel{ID: id, Err: cancelErr})
			select {
			case r = <-reply:
			case <-c.closedCh:
				return nil, actors.Lease{}, ErrClosed
			}
			if r.Err == nil {
				// Served just as we gave up: the connection goes back untouched.
				c.sys.Root.Send(h.PID, &actors.Release{ConnID: r.Lease.ConnID, Reusable: true})
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
			return nil, actors.Lease{}, fmt.Errorf("connactor: route %s keeps failing: %w", key, r.Err)
		}
		if r.Err != nil {
			return nil, actors.Lease{}, fmt.Errorf("connactor: dial %s: %w", key, r.Err)
		}
		return h, r.Lease, nil
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
		return nil, ctx.Err()
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
		cancelErr = ctx.Err()
	case <-timeout:
		cancelErr = fmt.Errorf("%w after %v waiting for admission (MaxConcurrentRequests %d)", ErrLeaseTimeout, c.cfg.LeaseTimeout, c.cfg.MaxConcurrentRequests)
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

// replayable decides whether a request that failed on a re-used connection may
// be sent again on a new one, and returns the request to send: nothing was
// written, or the method is idempotent (RFC 9110 section 9.2.2) or the request
// carries an Idempotency-Key; and its body can be replayed (none, or GetBody).
// A request whose response had started is never replayed.
func replayable(req *http.Request, err error) (*http.Request, bool) {
	var ee *conn.ExchangeError
	if !errors.As(err, &ee) || ee.GotByte || req.Context().Err() != nil {
		return nil, false
	}
	if ee.Written && !idempotent(req) {
		return nil, false
	}
	if req.Body == nil || req.Body == http.NoBody {
		return req, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	body, gerr := req.GetBody()
	if gerr != nil {
		return nil, false
	}
	next := *req
	next.Body = body
	return &next, true
}

func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	_, k1 := req.Header["Idempotency-Key"]
	_, k2 := req.Header["X-Idempotency-Key"]
	return k1 || k2
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
