package conn

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync/atomic"

	"golang.org/x/net/http/httpguts"
)

// onExchange serves the lease holder's ExchangeRequest on its own goroutine. A
// panic is answered as an error (with the synchronized dispatcher a lost answer
// would hang the caller) and leaves the connection broken.
func (c *Actor) onExchange(m *ExchangeRequest) {
	answered := false
	defer func() {
		if r := recover(); r != nil {
			c.broken = true
			if c.nc != nil {
				c.nc.Close()
			}
			if !answered {
				m.Reply <- ExchangeResponse{Err: fmt.Errorf("conn: internal error: %v", r)}
			}
		}
	}()
	resp, err := c.exchange(m)
	answered = true
	if err != nil {
		m.Reply <- ExchangeResponse{Err: err}
		return
	}
	m.Reply <- ExchangeResponse{Resp: resp}
}

// exchange writes the request and reads the response head with net/http's own
// machinery (RFC 9112 framing, chunked bodies, trailers). The request is written
// on this goroutine, unless it expects 100-continue (see expectation). It fires
// the httptrace hooks of the request's context that belong to the exchange:
// WroteHeaderField, WroteHeaders and WroteRequest (from Request.Write),
// Wait100Continue, GotFirstResponseByte, Got100Continue and Got1xxResponse.
func (c *Actor) exchange(m *ExchangeRequest) (*http.Response, error) {
	req := m.Req
	if c.nc == nil || c.broken {
		return nil, &ExchangeError{Op: "write", Reused: m.Reused, Err: ErrStaleConn}
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, &ExchangeError{Op: "write", Reused: m.Reused, Err: err}
	}
	if err := c.stopWatch(); err != nil {
		c.broken = true
		c.nc.Close()
		return nil, &ExchangeError{Op: "write", Reused: m.Reused, Err: fmt.Errorf("%w: %w", ErrStaleConn, err)}
	}
	if err := c.checkIdle(); err != nil {
		c.broken = true
		c.nc.Close()
		return nil, &ExchangeError{Op: "write", Reused: m.Reused, Err: fmt.Errorf("%w: %w", ErrStaleConn, err)}
	}
	c.served++
	c.wr.n.Store(0)
	c.rd.n = 0

	// The request's context bounds the whole exchange, body included: when it
	// ends, a past deadline interrupts whatever I/O is blocked.
	b := &body{c: c} // one allocation for the body and the exchange's deadlines
	b.deadlines = exchangeDeadlines{nc: c.nc, ctx: ctx}
	dl := &b.deadlines
	dl.watch()
	trace := httptrace.ContextClientTrace(ctx)

	var ex *expectation
	if c.opt.ExpectContinueTimeout > 0 && expectsContinue(req) {
		ex = c.startExpect(req, trace, dl)
	} else {
		if err := c.writeRequest(req); err != nil {
			return c.abort(m, dl, nil, "write", err)
		}
		dl.startHeaderTimeout(c.opt.ResponseHeaderTimeout)
	}

	resp, ambiguous, err := c.readHead(req, trace, ex)
	if err != nil {
		return c.abort(m, dl, ex, "read", err)
	}
	dl.endHead()
	reusable, idle := Reusable(req, resp)
	if ambiguous {
		// Content-Length with chunked, or Transfer-Encoding in HTTP/1.0: the
		// response is read as ReadResponse framed it (as net/http does), and
		// the connection closed after it.
		reusable, idle = false, 0
	}
	b.rc, b.dl, b.ex, b.done, b.reusable, b.idle = resp.Body, dl, ex, m.Done, reusable, idle
	b.remaining = resp.ContentLength
	if resp.Body == http.NoBody || req.Method == http.MethodHead {
		// No body (HEAD, 204, 304, Content-Length: 0): the exchange is over now.
		resp.Body.Close()
		b.finish(true)
		resp.Body = http.NoBody
		return resp, nil
	}
	resp.Body = b
	return resp, nil
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

// writeRequest writes req on this goroutine and flushes it. Request.Write fires
// WroteHeaderField, WroteHeaders and WroteRequest itself (before the final flush,
// as in net/http's transport).
func (c *Actor) writeRequest(req *http.Request) error {
	err := c.writeForm(req) // origin- or absolute-form (proxy.go)
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
func (c *Actor) readHead(req *http.Request, trace *httptrace.ClientTrace, ex *expectation) (resp *http.Response, ambiguous bool, err error) {
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
		if code == http.StatusContinue && ex != nil {
			if trace != nil && trace.Got100Continue != nil {
				trace.Got100Continue()
			}
			ex.decide(true)
		}
		if code > 199 || code == http.StatusSwitchingProtocols {
			if ex != nil {
				// A final status without 100 Continue: send the body anyway if the
				// connection stays open (the server reads and discards it, RFC 9110
				// section 10.1.1), skip it if the connection closes (net/http's rule).
				ex.decide(!resp.Close && !req.Close)
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
func (c *Actor) abort(m *ExchangeRequest, dl *exchangeDeadlines, ex *expectation, op string, err error) (*http.Response, error) {
	ctxEnded := !dl.release()
	if ex != nil {
		ex.decide(false)
		if werr := ex.writeErr(); werr != nil {
			op, err = "write", werr // the write failed first; the read failed because of it
		}
	}
	switch {
	case errors.Is(err, errHeaderLimit):
		err = fmt.Errorf("%w (limit %d bytes)", ErrResponseHeaderTooLarge, c.opt.MaxResponseHeaderBytes)
	case ctxEnded && dl.ctx.Err() != nil:
		err = fmt.Errorf("%w (%w)", dl.ctx.Err(), err)
	case op == "read" && dl.headerExpired():
		// Whatever the read returned: a timeout, or the partial line bufio
		// handed to ReadResponse without its timeout ("malformed HTTP
		// response \"HTT\"", issue 10).
		if isTimeout(err) {
			err = fmt.Errorf("%w after %v", ErrResponseHeaderTimeout, c.opt.ResponseHeaderTimeout)
		} else {
			err = fmt.Errorf("%w after %v (head cut short: %v)", ErrResponseHeaderTimeout, c.opt.ResponseHeaderTimeout, err)
		}
	case op == "read" && c.rd.n == 0 && errors.Is(err, io.EOF):
		err = fmt.Errorf("server closed the connection without answering: %w", err)
	}
	c.broken = true
	c.nc.Close()
	if ex != nil {
		ex.stop()
	}
	return nil, &ExchangeError{Op: op, Written: c.wr.n.Load() > 0, GotByte: c.rd.n > 0, Reused: m.Reused, Err: err}
}

// expectsContinue reports whether req waits for 100 Continue before its body.
func expectsContinue(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody &&
		httpguts.HeaderValuesContainsToken(req.Header["Expect"], "100-continue")
}

// countingReader sits under the connection's bufio.Reader: it counts response
// bytes and, while limit >= 0, refuses to read more than limit bytes (the
// response header budget, as net/http's persistConn.readLimit). Only the
// goroutine reading the response uses it.
type countingReader struct {
	r     io.Reader
	n     int64 // bytes read in the current exchange
	limit int64 // bytes still allowed; -1 = unlimited
}

var errHeaderLimit = errors.New("header limit reached")

func (r *countingReader) Read(p []byte) (int, error) {
	if r.limit == 0 {
		return 0, errHeaderLimit
	}
	if r.limit > 0 && int64(len(p)) > r.limit {
		p = p[:r.limit]
	}
	n, err := r.r.Read(p)
	r.n += int64(n)
	if r.limit > 0 {
		r.limit -= int64(n)
	}
	return n, err
}

// countingWriter sits under the connection's bufio.Writer and counts bytes that
// reached the socket: zero means a replay cannot duplicate anything. n is read
// by the response side while a request is written on its own goroutine.
type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n.Add(int64(n))
	return n, err
}
