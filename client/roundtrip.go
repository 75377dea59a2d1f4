package client

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/internal/dispatch"
	"github.com/connactor/connactor/telemetry"
)

// RoundTrip sends req on a pooled connection and returns the response as soon as
// its head is read; the body streams from the connection, which returns to the
// pool when the body is read to EOF or closed. Any status, 4xx and 5xx included,
// is a response; transport failures are errors (see ErrNotSent). It blocks until
// the head arrives, req's context ends, or Config.LeaseTimeout passes while
// waiting for a connection. A connection found closed by the server before
// anything was written to it is discarded and the request sent on another, as
// often as that happens (no replay: nothing was sent). A request that fails on
// a re-used connection before any response byte is retried once on a new
// connection when replaying it is safe: an idempotent method, or a body it can
// get again (GetBody). A body that is neither read to EOF nor closed holds its
// connection: Stats counts it as leased. Safe for concurrent use.
//
// The life of a request: admission (a FIFO semaphore, an atomic while under
// MaxConcurrentRequests); a LeaseRequest to the route actor, answered through
// its ticket; the exchange on the leased connection, run on this goroutine;
// and, when the body ends, a Released to the route actor. Package actors'
// documentation maps every hop.
func (c *Client) RoundTrip(req *http.Request) (*http.Response, error) {
	return c.roundTrip(req, nil)
}

// roundTrip is RoundTrip with the hooks of a Handle from Send (nil for
// RoundTrip): it tells them when the request holds a connection, and asks
// them about non-fatal problems (see dispatch.Hooks).
func (c *Client) roundTrip(req *http.Request, hooks dispatch.Hooks) (*http.Response, error) {
	var identity string
	if req != nil { // a nil request is refused by Key
		identity = IdentityFrom(req.Context())
	}
	key, err := c.pool.Key(req, identity)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	// The span covers admission, the lease and the exchange; out is req, or a
	// copy carrying the propagator's headers.
	out, tel := c.tel.StartRequest(req.Context(), req, key.Scheme, key.Host, key.Port)
	// The call's one clock read serves the retry budget (it counts the
	// request in its second) and every wait error (how long since the
	// request began); telemetry, when on, reads its own.
	call := c.pool.NewCall(out, key, tel)
	c.budget.request(call.Started())
	defer call.Stop()
	if err := call.Admit(); err != nil {
		closeBody(req)
		c.failed(tel, err)
		return nil, err
	}
	resp, early, err := c.send(&call, out, tel, hooks)
	if err == nil && early != nil && hooks != nil && !hooks.EarlyResponse(early) {
		resp.Body.Close() // made fatal: the response is discarded, its connection closed
		c.failed(tel, early)
		return nil, early
	}
	if err != nil {
		call.Leave()
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

// send leases a connection and exchanges req on it, replaying it on another
// connection when the attempt failed in a way that makes a replay safe
// (Exchange.Replay), within the retry budget and Send's hooks. A connection
// found dead before anything was written (LeaseAgain) is no attempt: the
// request, which never left, is leased again, and neither the budget nor the
// hooks count it.
func (c *Client) send(call *actors.Call, req *http.Request, tel *telemetry.Request, hooks dispatch.Hooks) (resp *http.Response, early, err error) {
	fresh, avoid := false, uint64(0)
	for attempt := 0; ; attempt++ {
		x, err := call.Lease(fresh, avoid)
		if err != nil {
			closeBody(req)
			return nil, nil, err
		}
		if hooks != nil {
			if err := hooks.Leased(); err != nil {
				x.GiveBack() // aborted meanwhile: nothing is written
				closeBody(req)
				return nil, nil, err
			}
		}
		resp, won, err := call.RoundTrip(x, req) // hedged when Config.Hedge says so (actors/pool_hedge.go)
		if err == nil {
			return resp, won.Early(), nil // the winning attempt's: a hedge's, when one won
		}
		switch next, how := x.Replay(req, err, attempt); how {
		case actors.LeaseAgain:
			attempt-- // the route discarded the dead connection; the same attempt goes on
			avoid = x.ConnID()
			continue
		case actors.ReplayRefused:
			c.budget.spend() // refused unprocessed: counted, never refused (see RetryBudget)
			tel.Retry(err)
			req, avoid = next, x.ConnID()
			continue
		case actors.ReplayStale:
			if !c.budget.allow() {
				tel.RetryRefused(err)
			} else if hooks == nil || hooks.Replaying(err) {
				tel.Retry(err)
				req = next
				fresh, avoid = true, x.ConnID()
				continue
			}
		}
		closeBody(req)
		if ctxErr := call.Context().Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			return nil, nil, fmt.Errorf("%w: %w", ctxErr, err)
		}
		return nil, nil, err
	}
}

func closeBody(req *http.Request) {
	if req != nil && req.Body != nil {
		req.Body.Close()
	}
}
