package conn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"time"
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

func (c *Actor) exchange(m *ExchangeRequest) (*http.Response, error) {
	req := m.Req
	fail := func(op string, err error) (*http.Response, error) {
		c.broken = true
		c.nc.Close()
		return nil, &ExchangeError{Op: op, Written: c.wr.n > 0, GotByte: c.rd.n > 0, Reused: m.Reused, Err: err}
	}
	if c.nc == nil || c.broken {
		return nil, &ExchangeError{Op: "write", Reused: m.Reused, Err: ErrStaleConn}
	}
	if err := c.stopWatch(); err != nil {
		return fail("write", fmt.Errorf("%w: %v", ErrStaleConn, err))
	}
	c.served++
	c.wr.n, c.rd.n = 0, 0

	// The request's context bounds the whole exchange, body included: when it
	// ends, a past deadline interrupts whatever I/O is blocked.
	ctx := req.Context()
	var stopCtx func() bool
	if ctx.Done() != nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		nc := c.nc
		stopCtx = context.AfterFunc(ctx, func() { nc.SetDeadline(aLongTimeAgo) })
	}
	ctxErr := func(err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%w (%v)", cerr, err)
		}
		return err
	}
	trace := httptrace.ContextClientTrace(ctx)

	if err := req.Write(c.bw); err != nil {
		stopAfter(stopCtx)
		return fail("write", ctxErr(err))
	}
	if err := c.bw.Flush(); err != nil {
		stopAfter(stopCtx)
		return fail("write", ctxErr(err))
	}
	if trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}

	if c.opt.ResponseHeaderTimeout > 0 {
		c.nc.SetReadDeadline(time.Now().Add(c.opt.ResponseHeaderTimeout))
	}
	var resp *http.Response
	for {
		c.rd.limit = c.opt.MaxResponseHeaderBytes
		r, err := http.ReadResponse(c.br, req)
		if err != nil {
			switch {
			case errors.Is(err, errHeaderLimit) || c.rd.limit == 0:
				err = fmt.Errorf("%w (limit %d bytes)", ErrResponseHeaderTooLarge, c.opt.MaxResponseHeaderBytes)
			case isTimeout(err) && ctx.Err() == nil && c.opt.ResponseHeaderTimeout > 0:
				err = ErrResponseHeaderTimeout
			}
			stopAfter(stopCtx)
			return fail("read", ctxErr(err))
		}
		if c.rd.n > 0 && trace != nil && trace.GotFirstResponseByte != nil && resp == nil {
			trace.GotFirstResponseByte()
		}
		// 1xx informational responses (100 Continue, 103 Early Hints) precede the
		// final response on the same connection (RFC 9110 section 15.2); 101
		// switches protocols and is final.
		if r.StatusCode >= 100 && r.StatusCode < 200 && r.StatusCode != http.StatusSwitchingProtocols {
			if trace != nil && trace.Got1xxResponse != nil {
				if err := trace.Got1xxResponse(r.StatusCode, textproto.MIMEHeader(r.Header)); err != nil {
					stopAfter(stopCtx)
					return fail("read", err)
				}
			}
			if r.StatusCode == http.StatusContinue && trace != nil && trace.Got100Continue != nil {
				trace.Got100Continue()
			}
			resp = r
			continue
		}
		resp = r
		break
	}
	c.rd.limit = -1
	if c.opt.ResponseHeaderTimeout > 0 {
		c.nc.SetReadDeadline(time.Time{})
	}
	reusable, idle := Reusable(req, resp)
	b := &body{c: c, ctx: ctx, rc: resp.Body, done: m.Done, reusable: reusable, idle: idle, stopCtx: stopCtx,
		remaining: resp.ContentLength}
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

func stopAfter(stop func() bool) {
	if stop != nil {
		stop()
	}
}

// countingReader sits under the connection's bufio.Reader: it counts response
// bytes and, while limit >= 0, refuses to read more than limit bytes (the
// response header budget, as net/http's persistConn.readLimit).
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
// reached the socket: zero means a replay cannot duplicate anything.
type countingWriter struct {
	w io.Writer
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n += int64(n)
	return n, err
}
