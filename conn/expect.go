package conn

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

// expectation is the write of a request that carries "Expect: 100-continue"
// (RFC 9110 section 10.1.1). The request is written on a goroutine of its own
// while the response side reads: the headers go out at once, and the body waits
// until the server answers 100 Continue, answers with a final status (the body is
// then sent only if the connection stays open), or ExpectContinueTimeout passes.
//
// net/http's Request.Write cannot stop between the headers and the body, so the
// body it copies is a gate (gatedBody) whose first Read blocks until that
// decision, much as net/http's transport passes waitForContinue to its private
// write method. Request.Write flushes the headers before it reads a body that is
// not an in-memory reader, so the server sees them while the gate is shut.
type expectation struct {
	once  sync.Once
	gate  chan bool  // cap 1: whether to send the body, sent once
	wrote chan error // cap 1: the writer's result
	body  io.Closer  // the caller's request body

	stopOnce sync.Once

	// Read by the response side only (the exchange, then its body).
	got bool
	err error
}

// errBodyNotSent ends the write of a request whose body was held back: the
// request on the wire is incomplete and the connection cannot be re-used.
var errBodyNotSent = errors.New("request body not sent: the server answered without 100 Continue")

// decide opens (true) or shuts (false) the gate; only the first call counts.
// It never blocks.
func (e *expectation) decide(send bool) {
	e.once.Do(func() { e.gate <- send })
}

// waitWritten waits at most d for the write to end and reports whether it
// completed: only then may the connection serve another request.
func (e *expectation) waitWritten(d time.Duration) bool {
	if !e.got {
		select {
		case e.err = <-e.wrote:
		default:
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case e.err = <-e.wrote:
			case <-t.C:
				return false
			}
		}
		e.got = true
	}
	return e.err == nil
}

// stop makes a writer that is still running end soon: the caller closes the
// socket, and this closes the request body, which ends a Read blocked on it (an
// io.Pipe, say), as net/http does when a request fails. It never blocks.
func (e *expectation) stop() {
	if e.got {
		return
	}
	select {
	case e.err = <-e.wrote:
		e.got = true
	default:
		e.stopOnce.Do(func() { e.body.Close() })
	}
}

// writeErr returns the writer's error if it already failed on its own (not
// because the body was held back). It never blocks.
func (e *expectation) writeErr() error {
	if !e.got {
		select {
		case e.err = <-e.wrote:
			e.got = true
		default:
			return nil
		}
	}
	if errors.Is(e.err, errBodyNotSent) {
		return nil
	}
	return e.err
}

// startExpect starts writing req on a goroutine owned by the client. When the
// write fails before the response head arrived, the socket is closed so that the
// response side stops waiting.
func (c *Actor) startExpect(req *http.Request, trace *httptrace.ClientTrace, dl *exchangeDeadlines) *expectation {
	e := &expectation{gate: make(chan bool, 1), wrote: make(chan error, 1), body: req.Body}
	gb := &gatedBody{rc: req.Body, e: e, trace: trace, timeout: c.opt.ExpectContinueTimeout}
	r := *req // shallow copy: the caller's request is left as it was
	r.Body = gb
	rht := c.opt.ResponseHeaderTimeout
	c.opt.Go(func() { // owned by the client's WaitGroup; ends when the request is written or the socket fails
		// Origin- or absolute-form (proxy.go); fires WroteHeaders and WroteRequest.
		// Only this goroutine writes until the exchange ends.
		err := c.writeRequest(&r)
		if gb.skipped {
			err = errBodyNotSent
		}
		if err == nil {
			dl.startHeaderTimeout(rht)
		}
		e.wrote <- err
		if err != nil && !gb.skipped {
			dl.writeFailed()
		}
	})
	return e
}

// gatedBody is the request body as Request.Write sees it under an expectation:
// its first Read waits for the decision (at most timeout, after which the body
// is sent anyway, as net/http does).
type gatedBody struct {
	rc      io.ReadCloser
	e       *expectation
	trace   *httptrace.ClientTrace
	timeout time.Duration

	decided, skipped bool // touched by the writing goroutine only
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if !b.decided {
		b.decided = true
		if b.trace != nil && b.trace.Wait100Continue != nil {
			b.trace.Wait100Continue()
		}
		t := time.NewTimer(b.timeout)
		var send bool
		select {
		case send = <-b.e.gate:
		case <-t.C:
			b.e.decide(true)
			send = <-b.e.gate // true, unless the response side decided just before
		}
		t.Stop()
		b.skipped = !send
	}
	if b.skipped {
		return 0, errBodyNotSent
	}
	return b.rc.Read(p)
}

func (b *gatedBody) Close() error { return b.rc.Close() }
