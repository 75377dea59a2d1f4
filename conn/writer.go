package conn

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// reqWriter is the write side of an exchange whose request has a body: the
// request is written on a goroutine owned by the client while the exchange
// reads the response, full duplex as net/http's Transport does it.
// A body may then stream while the response streams back (an io.Pipe fed from
// what the response says, a CONNECT tunnel), and a server that answers before
// reading the whole body (401 or 413 before an upload) is heard. Requests
// without a body are written inline by the exchange and have no reqWriter; a
// small in-memory body is written inline too, before the head is read, but has
// a reqWriter all the same (see maxInlineBody).
//
// "Expect: 100-continue" (RFC 9110 section 10.1.1) is the same writer with a
// gate: the headers go out at once and the body waits for 100 Continue, a final
// status (the body is then sent only if the connection stays open, net/http's
// rule), or ExpectContinueTimeout. net/http's Request.Write cannot stop between
// the headers and the body, so the body it copies (reqBody) blocks on its first
// Read until the gate opens; Request.Write flushes the headers before it reads
// a body that is not an in-memory reader, so the server sees them meanwhile.
//
// Who decides what: the writer only reports its outcome (done, once). The
// response side (the exchange, then the response body's finish) alone decides
// whether the connection is re-used, exactly once, and only after the writer
// reported success; otherwise it closes the socket, which ends the writer.
type reqWriter struct {
	done chan error // cap 1: the write's outcome, sent once by the writer
	body io.Closer  // the caller's body: closing it ends a Read blocked on it

	// Read-only for write.
	c     *Actor
	dl    *exchangeDeadlines
	req   *http.Request // what Request.Write writes: the caller's, or a copy carrying rb
	gzip  bool          // with "Accept-Encoding: gzip" (ExchangeRequest.AcceptGzip)
	async bool          // runs on a goroutine of its own (counted in c.lent while it does)
	rb    *reqBody      // nil for an in-memory body without Expect: 100-continue

	gate    chan bool   // cap 1, nil without Expect: 100-continue: send the body or not
	decided atomic.Bool // the gate's decision was made
	stopped atomic.Bool // the response side stopped the write (stop): its error is not news

	stopOnce sync.Once

	// Read by the response side only (the exchange, then its body).
	got         bool
	err         error
	decidedLate bool // the final status decided the gate (no 100 Continue came first)
}

// errBodyNotSent ends the write of a request whose body was held back: the
// request on the wire is incomplete and the connection cannot be re-used.
var errBodyNotSent = errors.New("request body not sent: the server answered without 100 Continue")

// errWriteStopped is the outcome of a write the response side stopped.
var errWriteStopped = errors.New("request body not sent in full: the write was stopped")

// writeFailedGrace bounds how long the response side keeps reading after the
// socket failed under the writer (EPIPE, ECONNRESET): a server that answered
// and closed left its answer in the socket, and it is read at once; the bound
// only matters for a socket that fails to write yet never delivers an error to
// the reader.
const writeFailedGrace = time.Second

// maxInlineBody bounds the bodies written on the exchange's own goroutine, as
// requests without a body are: in-memory bodies (their Read never waits) no
// larger than this, which a socket takes whole, since each exchange starts with
// its send buffer drained and peers open receive windows well beyond this.
// Handing them to a goroutine measured about 25 us slower per small POST on
// loopback (BenchmarkExchange/post-small), for no gain in duplexity.
const maxInlineBody = 16 << 10

// startWriter writes req: on a goroutine owned by the client (opt.Go), or, for
// a small in-memory body, on this goroutine before the head is read (see
// maxInlineBody). The outcome is in the returned writer either way.
func (c *Actor) startWriter(req *http.Request, gzip bool, trace *httptrace.ClientTrace, dl *exchangeDeadlines) *reqWriter {
	w := &reqWriter{done: make(chan error, 1), body: req.Body, c: c, dl: dl, req: req, gzip: gzip}
	if c.opt.ExpectContinueTimeout > 0 && expectsContinue(req) {
		w.gate = make(chan bool, 1)
	}
	inMemory := inMemoryBody(req.Body)
	if w.gate != nil || !inMemory {
		// A body that can fail, or must wait: seen through reqBody. An
		// in-memory body is left as it is, so that Request.Write still sends
		// headers and body in one write.
		w.rb = &reqBody{rc: req.Body, w: w, trace: trace, timeout: c.opt.ExpectContinueTimeout}
		cp := *req // shallow copy: the caller's request is left as it was
		cp.Body = w.rb
		w.req = &cp
	}
	if w.gate == nil && inMemory && req.ContentLength > 0 && req.ContentLength <= maxInlineBody {
		w.write()
	} else {
		w.async = true
		c.lent.Add(1) // the writer touches bw until it reports
		if c.opt.Home.Foreign(time.Now()) {
			// The caller is in a testing/synctest bubble the client is not
			// in: the writer reads the caller's body and reports on channels
			// made here, all of that bubble's, and must be of it too; the
			// client's WaitGroup must not be added to from inside it.
			go w.write() // owned by the exchange, and by the bubble, which waits for it: ends as below
		} else {
			c.opt.Go(w.write) // owned by the client's WaitGroup; ends when the request is written or the socket fails
		}
	}
	return w
}

// write writes the request and reports the outcome on done. Only it writes to
// the connection until the exchange ends.
func (w *reqWriter) write() {
	c, dl, rb := w.c, w.dl, w.rb
	// Origin- or absolute-form (proxy.go); fires WroteHeaders and WroteRequest.
	err := c.writeRequest(w.req, w.gzip)
	interrupt, failed := false, false
	switch {
	case err == nil:
		dl.startHeaderTimeout(c.opt.ResponseHeaderTimeout)
	case w.stopped.Load():
		err = errWriteStopped
	case rb != nil && rb.skipped:
		err = errBodyNotSent
	case c.wr.err == nil:
		// The socket did not fail: the body did (or net/http refused it, e.g.
		// shorter than its ContentLength). Request.Write hides the body's own
		// error in a type of its own; reqBody kept it.
		cause := err
		if rb != nil && rb.readErr != nil {
			cause = rb.readErr
		}
		err = &RequestBodyError{Err: cause, Written: c.wr.n.Load() > 0}
		interrupt = true
	default:
		failed = true
	}
	if w.async {
		c.lent.Add(-1) // the connection's buffers are not touched beyond this point
	}
	w.done <- err
	switch {
	case interrupt:
		// The request on the wire is incomplete: the server may wait for the
		// rest forever. The response side stops and reports err.
		dl.interrupt()
	case failed:
		dl.writeFailed(writeFailedGrace)
	}
}

// decide opens (true) or shuts (false) the gate; only the first decision
// counts, and it reports whether it was this one. It never blocks.
func (w *reqWriter) decide(send bool) bool {
	if w.gate == nil || !w.decided.CompareAndSwap(false, true) {
		return false
	}
	w.gate <- send
	return true
}

// poll reports, without blocking, whether the writer has finished.
func (w *reqWriter) poll() bool {
	if !w.got {
		select {
		case w.err = <-w.done:
			w.got = true
		default:
		}
	}
	return w.got
}

// waitWritten waits at most d for the write to end and reports whether it
// completed: only then may the connection serve another request.
func (w *reqWriter) waitWritten(d time.Duration) bool {
	if !w.poll() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case w.err = <-w.done:
			w.got = true
		case <-t.C:
			return false
		}
	}
	return w.err == nil
}

// failure returns, without blocking, the error of a write that failed on its
// own: not one held back by the gate or stopped by the response side.
func (w *reqWriter) failure() error {
	if !w.poll() || errors.Is(w.err, errBodyNotSent) || errors.Is(w.err, errWriteStopped) {
		return nil
	}
	return w.err
}

// bodyFailure returns the write's error if the request body failed.
func (w *reqWriter) bodyFailure() error {
	var be *RequestBodyError
	if err := w.failure(); errors.As(err, &be) {
		return be
	}
	return nil
}

// stop makes a writer that is still running end soon, without closing the
// socket: a past write deadline ends a blocked socket write, and closing the
// caller's body ends a Read blocked on it (an io.Pipe, say), as net/http does
// when a request ends before its body. It never blocks.
func (w *reqWriter) stop(dl *exchangeDeadlines) {
	if w.poll() {
		return
	}
	w.stopped.Store(true)
	dl.stopWrite()
	w.stopOnce.Do(func() { w.body.Close() })
}

// atHead settles the write once the final response head has arrived, and says
// whether the response is early: it came before the request's body was written
// in full, and the rest will not be sent (a non-fatal problem for Send's handlers: the
// server answered while the client was still sending).
//
//   - The writer finished: cleanly (not early); with a body error (bodyErr: the
//     request failed, whatever the server said); with a socket error (early: the
//     server answered and closed, e.g. 413 before an upload).
//   - The writer still runs and the status is 300 or more: the server's answer
//     is final and it is not reading the rest for a purpose, so the write is
//     stopped (early), as curl does ("HTTP error before end of send, stop
//     sending"). Unless the gate is still shut because this very status decided
//     it: the expectation's own rule applies then.
//   - The writer still runs and the status is below 300: full duplex, the
//     write goes on (a stream echoed back, a CONNECT tunnel); whether the
//     connection is re-used is decided when the response ends.
func (w *reqWriter) atHead(resp *http.Response, dl *exchangeDeadlines) (early, bodyErr error) {
	if w.poll() {
		if w.err == nil || errors.Is(w.err, errBodyNotSent) {
			return nil, nil
		}
		if be := w.bodyFailure(); be != nil {
			return nil, be
		}
		return &EarlyResponseError{StatusCode: resp.StatusCode, WriteErr: w.err}, nil
	}
	if resp.StatusCode < 300 || w.decidedLate {
		return nil, nil
	}
	w.stop(dl)
	return &EarlyResponseError{StatusCode: resp.StatusCode}, nil
}

// reqBody is the request body as Request.Write sees it when the write runs on
// its own goroutine: it holds the body back under Expect: 100-continue until
// the gate opens (at most timeout, after which the body is sent anyway, as
// net/http does), and it keeps the body's own read error, which Request.Write
// returns hidden in a type of its own.
type reqBody struct {
	rc      io.ReadCloser
	w       *reqWriter
	trace   *httptrace.ClientTrace
	timeout time.Duration

	// Touched by the writing goroutine only.
	decided, skipped bool
	readErr          error
}

func (b *reqBody) Read(p []byte) (int, error) {
	if b.w.gate != nil && !b.decided {
		b.decided = true
		if b.trace != nil && b.trace.Wait100Continue != nil {
			b.trace.Wait100Continue()
		}
		t := time.NewTimer(b.timeout)
		var send bool
		select {
		case send = <-b.w.gate:
		case <-t.C:
			b.w.decide(true)
			send = <-b.w.gate // true, unless the response side decided just before
		}
		t.Stop()
		b.skipped = !send
	}
	if b.skipped {
		return 0, errBodyNotSent
	}
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF {
		b.readErr = err
	}
	return n, err
}

func (b *reqBody) Close() error { return b.rc.Close() }

// hasBody reports whether req has a body to send (written by a reqWriter).
func hasBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody
}

// expectsContinue reports whether req waits for 100 Continue before its body.
func expectsContinue(req *http.Request) bool {
	return httpguts.HeaderValuesContainsToken(req.Header["Expect"], "100-continue")
}

var (
	nopCloserType         = reflect.TypeOf(io.NopCloser(nil))
	nopCloserWriterToType = reflect.TypeOf(io.NopCloser(struct {
		io.Reader
		io.WriterTo
	}{}))
)

// inMemoryBody reports whether r is one of the readers net/http treats as
// in memory (Request.Write then writes headers and body together): the
// bytes and strings readers, as such or under io.NopCloser (what
// http.NewRequest makes of them). Such bodies cannot fail a Read.
func inMemoryBody(r io.Reader) bool {
	switch r.(type) {
	case *bytes.Reader, *bytes.Buffer, *strings.Reader:
		return true
	}
	if t := reflect.TypeOf(r); t == nopCloserType || t == nopCloserWriterToType {
		inner, _ := reflect.ValueOf(r).Field(0).Interface().(io.Reader)
		return inMemoryBody(inner)
	}
	return false
}
