package dispatch

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// Handler is notified of a Handle's outcome.
// Notifications run on the Dispatcher's workers (the client's HandlerWorkers),
// never on the goroutine that called Send and never on an actor's: a slow
// handler delays only notifications, never the pool's actors or other routes'
// I/O. Handlers must be safe for concurrent use and should return quickly.
//
// Each Handle gets exactly one final notification, OnResponse or OnProblem with
// fatal=true, unless it is aborted or closed first: no notification starts
// after Abort or Close. Non-fatal problems come before the final notification,
// never after it. A handler may call Abort, Close, Await (it does not wait for
// notifications) and Send; it must not call the client's Close or Shutdown,
// which wait for the handler workers.
//
// A panic in a handler is contained (conc's panics package) and logged with its
// stack; it becomes a fatal problem for that Handle only (Await returns an error
// wrapping ErrHandlerPanicked). A panic in OnResponse discards the response and
// closes its connection; no further notification follows it.
type Handler interface {
	// OnResponse delivers the response as soon as its head is read. The body
	// streams from the connection, which stays leased until the body is read
	// to its end or closed (resp.Body.Close or Handle.Close): process responses
	// as they arrive, or the pool runs dry.
	OnResponse(h *Handle, resp *http.Response)
	// OnProblem reports a problem; for a non-fatal one, returning true makes it
	// fatal. A fatal problem is the final notification: the request is over and
	// holds no connection. The non-fatal problems are:
	//   - a request that failed on a re-used connection before any response
	//     byte and is about to be replayed on a fresh one (errors.Is ErrNotSent
	//     or ErrOutcomeUnknown); returning true refuses the replay;
	//   - a response that arrived before the request body was sent in full
	//     (errors.Is ErrEarlyResponse: the server answered early, e.g. 413 or
	//     401 to a large upload); its connection is not re-used; returning true
	//     discards the response.
	// Either way, when made fatal, OnProblem(h, err, true) follows.
	OnProblem(h *Handle, err error, fatal bool) (makeFatal bool)
}

// HandlerFuncs adapts two functions to Handler; a nil field ignores that
// notification (a nil Problem never escalates). A response nobody handles
// stays open until it is closed through Await or Handle.Close.
type HandlerFuncs struct {
	Response func(*Handle, *http.Response)   // as Handler.OnResponse
	Problem  func(*Handle, error, bool) bool // as Handler.OnProblem
}

// OnResponse calls f.Response if it is set.
func (f HandlerFuncs) OnResponse(h *Handle, resp *http.Response) {
	if f.Response != nil {
		f.Response(h, resp)
	}
}

// OnProblem calls f.Problem if it is set, and otherwise does not escalate.
func (f HandlerFuncs) OnProblem(h *Handle, err error, fatal bool) bool {
	if f.Problem != nil {
		return f.Problem(h, err, fatal)
	}
	return false
}

// Handle is one request handed over with Dispatcher.Send (the client's Send).
// Its methods are safe for concurrent use.
//
// A Handle is linked (Linked) from Send until the client holds nothing more
// for it: its request failed, its response body was read to the end or closed,
// or it was closed or aborted. A linked Handle with a response holds that
// response's connection: applications must process responses as they arrive
// (read the body to its end, or Close), or the pool runs dry. The client's Stats
// shows such a Handle as the age of the oldest unreleased lease (OldestLease).
type Handle struct {
	d       *Dispatcher
	orig    *http.Request // as passed to Send (returned by Request, set as resp.Request)
	req     *http.Request // orig with the Handle's context: what RoundTripWithHooks sends
	handler Handler
	cancel  context.CancelCauseFunc // ends the context of req: how the Handle aborts its request

	linked   atomic.Bool   // what Linked reports
	released atomic.Bool   // the Handle left the registry and its context was released
	done     chan struct{} // closed once the outcome is known, or the Handle stopped: Await wakes
	stopCh   chan struct{} // closed by Abort or Close: no notification starts after
	rtDone   chan struct{} // closed when the dispatch goroutine is over: no queue slot, no exchange

	// fatalErr replaces the error of the failure that ends the request when a
	// non-fatal problem was escalated by a panicking handler. Touched only by
	// the dispatch goroutine.
	fatalErr error

	mu      sync.Mutex
	state   handleState
	resp    *http.Response // state == stateResponse
	err     error          // state == stateFailed
	stopped bool           // Abort or Close was called; Await returns stopErr
	stopErr error
}

type handleState uint8

const (
	statePending handleState = iota
	stateResponse
	stateFailed
)

func newHandle(d *Dispatcher, req *http.Request, h Handler) *Handle {
	hd := &Handle{d: d, orig: req, handler: h,
		done: make(chan struct{}), stopCh: make(chan struct{}), rtDone: make(chan struct{})}
	parent := context.Background()
	if req != nil {
		parent = req.Context()
	}
	ctx, cancel := context.WithCancelCause(parent)
	hd.cancel = cancel
	if req != nil {
		hd.req = req.WithContext(ctx)
	}
	hd.linked.Store(true)
	return hd
}

// Request returns the request as it was passed to Send.
func (h *Handle) Request() *http.Request { return h.orig }

// Await blocks until the Handle's outcome is known or ctx ends, and returns it:
// the response (whose body streams from its connection: read it to the end or
// Close), or the error that ended the request. It does not wait for the
// notification handler, and may be called from it, any number of times.
// After Abort or Close it returns an error wrapping ErrAborted; when ctx ends
// first it returns ctx's error and leaves the request running.
func (h *Handle) Await(ctx context.Context) (*http.Response, error) {
	select {
	case <-h.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.stopped:
		return nil, h.stopErr
	case h.state == stateFailed:
		return nil, h.err
	}
	return h.resp, nil
}

// Close says the application is done with the response: its body is closed
// (a small unread rest is drained so the connection can be re-used, a large
// one closes it) and the Handle is unlinked. Before the response has arrived,
// Close aborts the request as Abort does. No notification starts after Close;
// later Awaits return an error wrapping ErrAborted. It returns the body's Close
// error; later calls return nil.
func (h *Handle) Close() error {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return nil
	}
	if h.state == statePending {
		h.mu.Unlock()
		h.stop(errHandleClosed)
		<-h.rtDone
		return nil
	}
	h.stopped, h.stopErr = true, errHandleClosed
	close(h.stopCh)
	resp := h.resp
	h.mu.Unlock()
	var err error
	if resp != nil {
		err = resp.Body.Close()
	}
	h.unlink()
	return err
}

// Abort abandons the request, at any time, without a notification: a request
// still waiting for admission or a connection leaves its queue (the server
// never sees it); one being sent or whose response head is awaited has its
// connection closed; a response already received has its body closed without
// draining and its connection closed, never re-used. Later Awaits return an
// error wrapping ErrAborted. Abort returns once the request has left its queue
// and connection (socket I/O is interrupted at once; a request body whose Read
// blocks delays it until that Read returns). It may be called from a
// notification handler, but not from the request's own httptrace hooks.
// Calling it again, or on a finished Handle, is harmless.
func (h *Handle) Abort() {
	h.stop(ErrAborted)
	<-h.rtDone
}

// Linked reports whether the Handle is still tied to the client: its request is
// pending or in flight, or its response body is open. Once false, it stays
// false. The answer may be stale by the time it is used.
func (h *Handle) Linked() bool { return h.linked.Load() }

// stop aborts the Handle with cause (what Await returns from now on) and does
// not wait for the dispatch goroutine. The Handle is marked stopped before its
// context is cancelled, so that a request failing because of the cancel is
// known to be aborted (no notification). A response is closed only once the
// context has ended: the connection is then closed, never drained nor re-used
// (conn's body checks the context when it finishes).
func (h *Handle) stop(cause error) {
	if h.markStopped(cause) {
		h.endStopped()
	}
}

// markStopped is stop's first half: from now on no notification starts, Await
// returns cause, and a request that is granted a connection gives it back
// unused, before writing a byte (see leased). It reports false if already
// stopped.
func (h *Handle) markStopped(cause error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return false
	}
	h.stopped, h.stopErr = true, cause
	close(h.stopCh)
	if h.state == statePending {
		close(h.done)
	}
	return true
}

// endStopped is stop's second half: the context is cancelled (a queued request
// leaves its queue, I/O in progress is interrupted), then a response received
// is closed with its connection.
func (h *Handle) endStopped() {
	h.mu.Lock()
	cause, resp := h.stopErr, h.resp
	h.mu.Unlock()
	h.cancel(cause)
	if resp != nil {
		resp.Body.Close()
	}
	h.unlink()
}

// leased is the request's Leased hook: it runs on the dispatch goroutine when
// an attempt of the request holds a connection, before anything is written.
// A Handle stopped meanwhile refuses the connection (the request path gives it
// back unused) and the request ends with the stop's cause. This is what lets
// AbortAll stop every Handle before it cancels any: a connection freed by one
// abort cannot carry a request that is about to be aborted.
func (h *Handle) leased() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return h.stopErr
	}
	return nil
}

// nonFatal notifies a non-fatal problem (the Replaying and EarlyResponse
// hooks) and reports whether to carry on.
func (h *Handle) nonFatal(err error) bool {
	if fatal := h.d.problem(h, err); fatal != nil {
		if fatal != err {
			h.fatalErr = fatal // the handler panicked: that is the problem now
		}
		return false
	}
	return true
}

// unlink marks the Handle over for the client: it leaves the registry of live
// Handles and its context is released.
func (h *Handle) unlink() {
	h.linked.Store(false)
	if h.released.CompareAndSwap(false, true) {
		h.d.remove(h)
		h.cancel(errHandleDone)
	}
}

// refuse ends a Handle that was never dispatched (the client is closed).
func (h *Handle) refuse(err error) {
	h.state, h.err = stateFailed, err
	close(h.done)
	close(h.rtDone)
	h.linked.Store(false)
	h.released.Store(true)
	h.cancel(errHandleDone)
}

// failed records the error that ended the request; it reports false when the
// Handle was stopped (no notification then).
func (h *Handle) failed(err error) bool {
	if h.fatalErr != nil {
		err = h.fatalErr
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return false
	}
	h.state, h.err = stateFailed, err
	h.linked.Store(false) // before Await can return: nothing holds a connection
	close(h.done)
	return true
}

// answered records the response; it reports false when the Handle was stopped,
// in which case the response has been closed (its connection too).
func (h *Handle) answered(resp *http.Response) bool {
	resp.Request = h.orig
	if resp.Body != http.NoBody {
		resp.Body = &handleBody{rc: resp.Body, h: h}
	}
	h.mu.Lock()
	if h.stopped {
		cause := h.stopErr
		h.mu.Unlock()
		h.cancel(cause) // stop may not have cancelled yet: end the context first, so no re-use
		resp.Body.Close()
		return false
	}
	h.state, h.resp = stateResponse, resp
	if resp.Body == http.NoBody {
		h.linked.Store(false) // the exchange is over: nothing holds a connection
	}
	close(h.done)
	h.mu.Unlock()
	return true
}

// beginNotification reports whether a notification may start: not after Abort
// or Close.
func (h *Handle) beginNotification() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.stopped
}

// handlerPanicked turns a panic in OnResponse into a fatal problem for this
// Handle: Await returns err from now on, and the response is discarded with its
// connection (the stream's state after a panic is unknown). Nothing is notified:
// the response notification has been given.
func (h *Handle) handlerPanicked(err error) {
	h.cancel(err)
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	resp := h.resp
	h.state, h.err, h.resp = stateFailed, err, nil
	h.mu.Unlock()
	if resp != nil {
		resp.Body.Close()
	}
	h.unlink()
}

func (h *Handle) urlString() string {
	if h.orig == nil || h.orig.URL == nil {
		return ""
	}
	return h.orig.URL.Redacted()
}

// handleBody wraps a Handle's response body to see its end: at EOF, a read
// error or Close the connection is released and the Handle unlinked.
type handleBody struct {
	rc io.ReadCloser
	h  *Handle
}

func (b *handleBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		b.h.unlink()
	}
	return n, err
}

func (b *handleBody) Close() error {
	err := b.rc.Close()
	b.h.unlink()
	return err
}
