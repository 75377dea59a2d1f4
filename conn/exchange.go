package conn

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
)

// onExchange serves the lease holder's ExchangeRequest on its own goroutine. A
// panic is answered as an error (a lost answer would hang the caller) and
// leaves the connection broken.
func (c *Actor) onExchange(m *ExchangeRequest) {
	defer func() {
		if r := recover(); r != nil {
			c.discard()
			c.pending = nil
			m.Reply.Deliver(ExchangeResponse{Err: fmt.Errorf("conn: internal error: %v", r)}) // false if answered
		}
	}()
	r := c.exchange(m)
	c.pending = nil
	if !m.Reply.Deliver(r) {
		c.unanswered(r)
	}
}

// discard marks the connection broken, so that no request is written to it
// again, and closes its socket at once (closeRaw: on a caller's goroutine, no
// TLS alert is waited for). Called inside Receive, or by the body the
// connection is lent to (finish).
func (c *Actor) discard() {
	c.broken = true
	if c.nc != nil {
		closeRaw(c.nc)
	}
}

// unanswered drops an answer its holder gave up on (its route stopped, and
// with it this connection): nobody will read the body, so the connection is
// closed, and Done is not called for a body (a response without one ended
// its exchange before it was answered; the holder knows it, see
// client/exchange.go).
func (c *Actor) unanswered(r ExchangeResponse) {
	if r.Resp == nil {
		return
	}
	c.discard()
	if b, ok := r.Resp.Body.(*body); ok {
		b.abandon()
	}
}

// exchange writes the request and reads the response head with net/http's own
// machinery (RFC 9112 framing, chunked bodies, trailers). A request without a
// body is written on this goroutine before the head is read; one with a body is
// written on a goroutine of its own while the head is read (see reqWriter). It
// fires the httptrace hooks of the request's context that belong to the
// exchange: WroteHeaderField, WroteHeaders and WroteRequest (from
// Request.Write), Wait100Continue, GotFirstResponseByte, Got100Continue and
// Got1xxResponse.
//
// A response without a body (HEAD, 204, 304, Content-Length: 0) ends the
// exchange before it is returned: the connection is back with its route (Done)
// when the holder gets the answer.
func (c *Actor) exchange(m *ExchangeRequest) ExchangeResponse {
	req := m.Req
	if m.ConnID != c.id { // the leased socket closed, and the actor serves another: leave that one be
		return ExchangeResponse{Err: &ExchangeError{Op: "write", Reused: m.Reused, Err: errConnGone}}
	}
	if c.nc == nil || c.broken {
		return ExchangeResponse{Err: &ExchangeError{Op: "write", Reused: m.Reused, Err: ErrStaleConn}}
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return ExchangeResponse{Err: &ExchangeError{Op: "write", Reused: m.Reused, Err: err}}
	}
	if err := c.stopWatch(); err != nil {
		return c.stale(m, err)
	}
	if err := c.checkIdle(); err != nil {
		return c.stale(m, err)
	}
	c.served++
	c.wr.n.Store(0)
	c.wr.err = nil
	c.rd.n = 0

	// The request's context bounds the whole exchange, body included: when it
	// ends, a past deadline interrupts whatever I/O is blocked.
	b := &body{c: c} // one allocation for the body and the exchange's deadlines
	b.deadlines = exchangeDeadlines{nc: c.nc, ctx: ctx}
	dl := &b.deadlines
	dl.watch()
	trace := httptrace.ContextClientTrace(ctx)

	var w *reqWriter
	if hasBody(req) {
		w = c.startWriter(req, m.AcceptGzip, trace, dl)
	} else {
		if err := c.writeRequest(req, m.AcceptGzip); err != nil {
			return c.abort(m, dl, nil, "write", err)
		}
		dl.startHeaderTimeout(c.opt.ResponseHeaderTimeout)
	}

	resp, ambiguous, err := c.readHead(req, trace, w)
	if err != nil {
		return c.abort(m, dl, w, "read", err)
	}
	dl.endHead()
	reusable, idle := Reusable(req, resp)
	if ambiguous {
		// Content-Length with chunked, or Transfer-Encoding in HTTP/1.0: the
		// response is read as ReadResponse framed it (as net/http does), and
		// the connection closed after it.
		reusable, idle, c.broken = false, 0, true
	}
	var early error
	if w != nil {
		var bodyErr error
		if early, bodyErr = w.atHead(resp, dl); bodyErr != nil {
			return c.abort(m, dl, w, "write", bodyErr)
		}
		if early != nil {
			reusable, idle, c.broken = false, 0, true
		}
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return ExchangeResponse{Resp: c.upgrade(resp, dl, w, m.Done)}
	}
	b.rc, b.dl, b.w, b.done, b.reusable, b.idle = resp.Body, dl, w, m.Done, reusable, idle
	b.remaining = resp.ContentLength
	if resp.Body == http.NoBody || req.Method == http.MethodHead {
		// No body (HEAD, 204, 304, Content-Length: 0): the exchange is over now.
		resp.Body.Close()
		b.finish(true)
		resp.Body = http.NoBody
		return ExchangeResponse{Resp: resp, Early: early}
	}
	resp.Body = b
	b.lent = true
	c.lent.Add(1)
	return ExchangeResponse{Resp: resp, Early: early}
}

// stale refuses a connection found unusable before anything was written.
func (c *Actor) stale(m *ExchangeRequest, err error) ExchangeResponse {
	c.discard()
	return ExchangeResponse{Err: &ExchangeError{Op: "write", Reused: m.Reused, Err: fmt.Errorf("%w: %w", ErrStaleConn, err)}}
}

// checkIdle makes sure nothing is waiting on a connection that served earlier
// requests before a new one is written to it: no bytes in the reader (they
// belong to no request), and nothing on the socket (see idleProbe).
func (c *Actor) checkIdle() error {
	if c.br.Buffered() > 0 {
		return errUnsolicited
	}
	if c.served == 0 || c.probe == nil {
		return nil
	}
	if res, err := c.probe.check(c.nc); res == probeStale {
		return err
	}
	return nil
}

// writeRequest writes req on this goroutine and flushes it. The writer fires
// WroteHeaderField, WroteHeaders and WroteRequest (before the final flush,
// as in net/http's transport).
func (c *Actor) writeRequest(req *http.Request, gzip bool) error {
	err := c.writeForm(req, gzip) // origin- or absolute-form (proxy.go)
	if err == nil {
		err = c.bw.Flush()
	}
	return err
}

// readHead reads the response head: it skips 1xx informational responses
// (100 Continue, 103 Early Hints; RFC 9110 section 15.2) to the final one, 101
// Switching Protocols being final. MaxResponseHeaderBytes bounds all the heads
// together, unless the caller sees each 1xx through Got1xxResponse, in which
// case each head gets the full budget (as net/http does). ambiguous reports a
// final head whose framing cannot be trusted for re-use (see rawHead).
func (c *Actor) readHead(req *http.Request, trace *httptrace.ClientTrace, w *reqWriter) (resp *http.Response, ambiguous bool, err error) {
	limit := c.opt.MaxResponseHeaderBytes
	if limit <= 0 {
		limit = 1 << 20
	}
	c.rd.limit = limit
	defer func() { c.rd.limit = -1 }()
	if _, err := c.br.Peek(1); err != nil {
		return nil, false, err
	}
	if trace != nil && trace.GotFirstResponseByte != nil {
		trace.GotFirstResponseByte()
	}
	var raw rawHead
	for {
		raw.mark(c.br, c.rd)
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return nil, false, err
		}
		code := resp.StatusCode
		if code < 100 {
			return nil, false, fmt.Errorf("malformed HTTP status code %q", resp.Status)
		}
		if code == http.StatusContinue && w != nil && w.gate != nil {
			if trace != nil && trace.Got100Continue != nil {
				trace.Got100Continue()
			}
			w.decide(true)
		}
		if code > 199 || code == http.StatusSwitchingProtocols {
			if w != nil {
				// A final status without 100 Continue: send the body anyway if the
				// connection stays open (the server reads and discards it, RFC 9110
				// section 10.1.1), skip it if the connection closes (net/http's rule).
				w.decidedLate = w.decide(!resp.Close && !req.Close)
			}
			return resp, raw.ambiguous(resp, c.br, c.rd), nil
		}
		if trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(code, textproto.MIMEHeader(resp.Header)); err != nil {
				return nil, false, err
			}
			c.rd.limit = limit
		}
	}
}

// abort ends a failed exchange: the connection is closed and the error says how
// far the exchange got.
func (c *Actor) abort(m *ExchangeRequest, dl *exchangeDeadlines, w *reqWriter, op string, err error) ExchangeResponse {
	ctxEnded := !dl.release()
	if w != nil {
		w.decide(false)
		if werr := w.failure(); werr != nil {
			op, err = "write", werr // the write failed first; the read failed because of it
		}
	}
	var bodyErr *RequestBodyError
	switch {
	case errors.As(err, &bodyErr):
		// The caller's body failed: that is the outcome, whatever the
		// connection did after it.
	case errors.Is(err, errHeaderLimit):
		err = fmt.Errorf("%w (limit %d bytes)", ErrResponseHeaderTooLarge, c.opt.MaxResponseHeaderBytes)
	case ctxEnded && dl.ctx.Err() != nil:
		err = fmt.Errorf("%w (%w)", dl.ctx.Err(), err)
	case op == "read" && dl.headerExpired():
		// Whatever the read returned: a timeout, or the partial line bufio
		// handed to ReadResponse without its timeout ("malformed HTTP
		// response \"HTT\"").
		if isTimeout(err) {
			err = fmt.Errorf("%w after %v", ErrResponseHeaderTimeout, c.opt.ResponseHeaderTimeout)
		} else {
			err = fmt.Errorf("%w after %v (head cut short: %v)", ErrResponseHeaderTimeout, c.opt.ResponseHeaderTimeout, err)
		}
	case op == "read" && c.rd.n == 0 && errors.Is(err, io.EOF):
		err = fmt.Errorf("server closed the connection without answering: %w", err)
	}
	c.discard()
	if w != nil {
		w.stop(dl)
	}
	if bodyErr != nil {
		return ExchangeResponse{Err: bodyErr}
	}
	return ExchangeResponse{Err: &ExchangeError{Op: op, Written: c.wr.n.Load() > 0, GotByte: c.rd.n > 0, Reused: m.Reused, Err: err}}
}
