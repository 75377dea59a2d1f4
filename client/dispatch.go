package client

import (
	"net/http"
	"sync"
)

// Handler is notified of a Handle's outcome.
// Notifications run on the client's handler workers (Config.HandlerWorkers),
// never on the goroutine that called Send and never on an actor's: a slow
// handler delays only notifications, never the pool's actors or other routes'
// I/O. Handlers must be safe for concurrent use and should return quickly.
//
// Each Handle gets exactly one final notification, OnResponse or OnProblem with
// fatal=true, unless it is aborted or closed first: no notification starts
// after Abort or Close. Non-fatal problems come before the final notification,
// never after it. A handler may call Abort, Close, Await (it does not wait for
// notifications) and Send; it must not call Client.Close or Shutdown, which wait
// for the handler workers.
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

// Send hands req over and returns at once; the request waits for admission and
// a connection in the background, queued in its route actor like any other,
// then is sent on a goroutine owned by the client (the exchange's I/O has to
// block somewhere, and never on the caller's or an actor's goroutine). h may be
// nil: the outcome is then only available through Await. Send never blocks, even
// when every connection and handler worker is busy. Safe for concurrent use.
//
// Request errors (nil request, bad URL, invalid headers) are reported as a fatal
// problem like any other failure. On a client that is closed or shutting down,
// Send returns a Handle that has already failed with ErrClosed, without a
// notification. The request's body is closed by the client, as with RoundTrip;
// the request's context bounds the whole exchange (its end is a fatal problem,
// unlike Abort which is silent).
//
// Costs, beyond RoundTrip's: one goroutine per request while it is pending or in
// flight, one context, and one task on the handler workers per notification.
func (c *Client) Send(req *http.Request, h Handler) *Handle {
	hd := newHandle(c, req, h)
	if !c.disp.register(hd) {
		closeBody(req)
		hd.refuse(ErrClosed)
	}
	return hd
}

// AbortAll aborts every Handle whose request is pending or in flight, or whose
// response body is still open, as Handle.Abort does (no notification follows),
// and returns once all of them have left their queues and connections. Handles
// sent while it runs may be spared. The client stays usable. Safe for
// concurrent use, and from a notification handler.
func (c *Client) AbortAll() {
	hs := c.disp.snapshot()
	// Stop them all before cancelling any: a connection freed by one abort must
	// not carry a request that is about to be aborted (see Handle.gotConn).
	for i, h := range hs {
		if !h.markStopped(ErrAborted) {
			hs[i] = nil
		}
	}
	for _, h := range hs {
		if h != nil {
			h.endStopped()
		}
	}
	for _, h := range hs {
		if h != nil {
			<-h.rtDone
		}
	}
}

// dispatcher holds what Send adds to a client: the registry of linked Handles
// (for AbortAll and Close) and the handler workers.
type dispatcher struct {
	c       *Client
	workers workers

	mu     sync.Mutex
	live   map[*Handle]struct{}
	closed bool
}

func (d *dispatcher) init(c *Client) {
	d.c = c
	d.live = map[*Handle]struct{}{}
	d.workers.init(c.cfg.HandlerWorkers, c.wg.Go, c.cfg.Logger)
}

// register records h and starts its dispatch goroutine, or reports false when
// the client is closing.
func (d *dispatcher) register(h *Handle) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.c.closing.Load() {
		return false
	}
	d.live[h] = struct{}{}
	d.c.wg.Go(func() { d.dispatch(h) }) // owned by the client's WaitGroup; ends with the request's exchange
	return true
}

// goIfOpen starts f on a goroutine owned by the client's WaitGroup, unless
// Close has begun (then it reports false). It starts the goroutine under the
// lock Close takes first, so that no goroutine is added once Close waits.
func (d *dispatcher) goIfOpen(f func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.c.wg.Go(f)
	return true
}

func (d *dispatcher) remove(h *Handle) {
	d.mu.Lock()
	delete(d.live, h)
	d.mu.Unlock()
}

func (d *dispatcher) snapshot() []*Handle {
	d.mu.Lock()
	defer d.mu.Unlock()
	hs := make([]*Handle, 0, len(d.live))
	for h := range d.live {
		hs = append(hs, h)
	}
	return hs
}

// close is called by Client.Close before anything else stops: new Sends are
// refused, every linked Handle is aborted (silently; Await returns an error that
// is both ErrAborted and ErrClosed), and the workers run the notifications
// already queued for other Handles, then exit (Close waits for them).
func (d *dispatcher) close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	d.mu.Unlock()
	hs := d.snapshot()
	for i, h := range hs {
		if !h.markStopped(errClosedAbort) {
			hs[i] = nil
		}
	}
	for _, h := range hs {
		if h != nil {
			h.endStopped()
		}
	}
	d.workers.close()
}

// dispatch runs one Handle's request on its own goroutine: RoundTrip does the
// queueing (admission, route FIFO), the exchange and the one replay; the
// Handle's context carries Abort into all of them.
func (d *dispatcher) dispatch(h *Handle) {
	defer close(h.rtDone)
	select {
	case <-h.stopCh:
		closeBody(h.req) // aborted before it started: never queued
		return
	default:
	}
	var resp *http.Response
	var err error
	if h.req == nil {
		_, err = d.c.RoundTrip(nil) // the usual "nil request" error
	} else {
		resp, err = d.c.roundTrip(h.req, h)
	}
	if err != nil {
		if h.failed(err) {
			d.final(h, nil, err)
			h.unlink() // after final's submit: Close either aborts h or lets the notification run
		}
		return
	}
	if !h.answered(resp) {
		return
	}
	d.final(h, resp, nil)
	if resp.Body == http.NoBody {
		h.unlink() // the exchange is over: nothing holds a connection
	}
}

// final queues the Handle's final notification.
func (d *dispatcher) final(h *Handle, resp *http.Response, err error) {
	if h.handler == nil {
		return
	}
	if err == nil {
		d.workers.submit(func() {
			if !h.beginNotification() {
				return
			}
			if perr := d.workers.try(h, "OnResponse", func() { h.handler.OnResponse(h, resp) }); perr != nil {
				h.handlerPanicked(perr)
			}
		})
		return
	}
	if h.fatalErr != nil {
		err = h.fatalErr
	}
	d.workers.submit(func() {
		if !h.beginNotification() {
			return
		}
		d.workers.try(h, "OnProblem", func() { h.handler.OnProblem(h, err, true) })
	})
}

// problem notifies a non-fatal problem and waits for the handler's decision,
// or for Abort. It returns nil to carry on, or the error that makes it fatal:
// err when the handler escalated it, the panic when the handler panicked.
func (d *dispatcher) problem(h *Handle, err error) error {
	if h.handler == nil {
		return nil
	}
	answer := make(chan error, 1)
	ok := d.workers.submit(func() {
		if !h.beginNotification() {
			answer <- ErrAborted
			return
		}
		var escalate bool
		if perr := d.workers.try(h, "OnProblem", func() { escalate = h.handler.OnProblem(h, err, false) }); perr != nil {
			answer <- perr
			return
		}
		if escalate {
			answer <- err
			return
		}
		answer <- nil
	})
	if !ok {
		return ErrClosed
	}
	select {
	case e := <-answer:
		return e
	case <-h.stopCh:
		return ErrAborted
	}
}

// replaying is a Handle's hook (problems): a request that failed on a
// re-used connection is a non-fatal problem, which the Handle's handler may
// escalate to refuse the replay; Abort refuses it too.
func (h *Handle) replaying(err error) bool { return h.nonFatal(err) }

// earlyResponse is a Handle's hook (problems): a response that arrived before
// the request body was sent in full (the server answered early, say 413) is
// a non-fatal problem before OnResponse, which the handler may escalate: the
// response is then discarded and OnProblem(err, true) follows.
func (h *Handle) earlyResponse(err error) bool { return h.nonFatal(err) }

// nonFatal notifies a non-fatal problem and reports whether to carry on.
func (h *Handle) nonFatal(err error) bool {
	if fatal := h.c.disp.problem(h, err); fatal != nil {
		if fatal != err {
			h.fatalErr = fatal // the handler panicked: that is the problem now
		}
		return false
	}
	return true
}
