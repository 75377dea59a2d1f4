package client

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"time"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/conn/h2"
	"github.com/connactor/connactor/internal/dispatch"
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

// roundTrip is RoundTrip with the hooks of a Handle from Send (nil for
// RoundTrip): it tells them when the request holds a connection, and asks
// them about non-fatal problems (see dispatch.Hooks).
func (c *Client) roundTrip(req *http.Request, hooks dispatch.Hooks) (*http.Response, error) {
	key, err := c.check(req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	// One clock read serves the retry budget (it counts the request in its
	// second) and every wait error (how long since the request began);
	// telemetry, when on, reads its own.
	lim := waitLimit{ctx: ctx, c: c, req: req, timeout: c.cfg.LeaseTimeout, started: time.Now()}
	c.budget.request(lim.started)
	// The span covers admission, the lease and the exchange; out is req, or a
	// copy carrying the propagator's headers.
	out, tel := c.tel.StartRequest(ctx, req, key.Scheme, key.Host, key.Port)
	gz := c.wantsGzip(out)
	defer lim.stop()
	if err := c.admit(&lim); err != nil {
		closeBody(req)
		c.failed(tel, err)
		return nil, err
	}
	resp, early, err := c.send(&lim, out, gz, key, tel, hooks)
	if err == nil && early != nil && hooks != nil && !hooks.EarlyResponse(early) {
		resp.Body.Close() // made fatal: the response is discarded, its connection closed
		c.failed(tel, early)
		return nil, early
	}
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

// send leases a connection and exchanges req on it (with "Accept-Encoding:
// gzip" when gz is set), replaying it once on a fresh connection when it
// failed on a re-used one and replaying is safe.
func (c *Client) send(l *waitLimit, req *http.Request, gz bool, key route.Key, tel *telemetry.Request, hooks dispatch.Hooks) (resp *http.Response, early, err error) {
	trace := httptrace.ContextClientTrace(l.ctx)
	fresh, avoid := false, uint64(0)
	for attempt := 0; ; attempt++ {
		x := &exchange{c: c, tel: tel, trace: trace, gzip: gz}
		if err := x.lease(l, key, fresh, avoid); err != nil {
			closeBody(req)
			return nil, nil, err
		}
		if hooks != nil {
			if err := hooks.Leased(); err != nil {
				// Aborted meanwhile: nothing is written, and the connection
				// goes back to its route as it came (Ticket.Returned).
				x.ticket.Cancel()
				c.sys.Root.Send(x.route.PID, &actors.LeaseCancelled{Ticket: &x.ticket})
				closeBody(req)
				return nil, nil, err
			}
		}
		resp, err := x.exchange(req)
		if err == nil {
			return resp, x.early, nil
		}
		if next, again := replay(req, err, x.got, attempt); again {
			if x.got.H2 != nil {
				c.budget.spend() // refused unprocessed: counted, never refused (see RetryBudget)
				tel.Retry(err)
				req, avoid = next, x.got.ConnID
				continue
			}
			if !c.budget.allow() {
				tel.RetryRefused(err)
			} else if hooks == nil || hooks.Replaying(err) {
				tel.Retry(err)
				req = next
				fresh, avoid = true, x.got.ConnID // HTTP/1.1 here: HTTP/2 replays took the branch above
				continue
			}
		}
		closeBody(req)
		if ctxErr := l.ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			return nil, nil, fmt.Errorf("%w: %w", ctxErr, err)
		}
		return nil, nil, err
	}
}

// maxStreamRetries bounds the replays of a request whose HTTP/2 streams are
// refused (GOAWAY, REFUSED_STREAM) one connection after another.
const maxStreamRetries = 3

// replay decides whether a failed attempt is sent again, and returns the
// request to send: once, on a fresh connection, after a re-used HTTP/1.1
// connection failed before any response byte (see replayable); up to
// maxStreamRetries times, on another connection, after an HTTP/2 stream was
// refused before the server processed it, whatever the method, if its body
// can be sent again.
func replay(req *http.Request, err error, got actors.Lease, attempt int) (*http.Request, bool) {
	if got.H2 == nil {
		if attempt == 0 && got.Reused {
			return replayable(req, err)
		}
		return nil, false
	}
	if attempt >= maxStreamRetries || !errors.Is(err, h2.ErrRefused) && !errors.Is(err, h2.ErrNoStream) {
		return nil, false
	}
	return rewound(req)
}
