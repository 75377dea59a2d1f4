// Package dispatch is the asynchronous API of connactor's client, apart from
// the pool it sends through: Send hands a request over and returns a Handle at
// once; the request runs on a goroutine of its own through a RoundTripper (the
// client's request path, with hooks); its outcome is told to a Handler on a
// small pool of workers, and can be awaited. SendAll fans requests out on top
// of it; AbortAll and Close abort every Handle in flight.
//
// Package client re-exports all of it (Handle, Handler, HandlerFuncs, Send,
// SendAll, AbortAll, ErrAborted, ErrHandlerPanicked): users import client,
// never this package. go doc shows an alias without the methods and fields of
// its type, so the aliases' doc comments in client repeat those of Handle's
// methods, Handler's and HandlerFuncs': change both together.
//
// The life of a Handle: Send registers it and starts its dispatch goroutine,
// which calls RoundTripWithHooks with the Handle's context (the request's,
// made cancellable: cancelling it is how the Handle aborts the request,
// wherever it is) and the Handle's Hooks. The request path tells the hooks
// when the request holds a connection (Leased, where an abort that came first
// gives the connection back unused), and asks them about non-fatal problems
// (Replaying, EarlyResponse), which the Handler may make fatal. The final
// outcome is recorded in the Handle (Await wakes) and its notification is
// queued for the workers. The Handle stays linked, and registered, until its
// response body ends or is closed.
//
// Abort, stage by stage (Handle.stop marks the Handle stopped, then cancels
// its context, then closes a response it holds):
//   - before the lease, the context's end takes the request out of its queue
//     (admission, the route's FIFO): nothing is written;
//   - as the lease is granted (stopped, not yet cancelled: AbortAll stops every
//     Handle before it cancels any), the Leased hook refuses the connection,
//     which goes back unused: nothing is written;
//   - while leased (written, or its head awaited), the context's end
//     interrupts the I/O: the connection is closed, never re-used;
//   - after the response, the body is closed after the context ended: it is
//     not drained, and the connection is closed, never re-used.
//
// (On HTTP/2 the last two reset the request's stream and keep the connection.)
//
// The Leased hook needs no abort of its own to hand over: the request's
// context already reaches every stage of the request path (the queues, the
// connection's I/O, the body), and one way to abort is easier to trust.
package dispatch

import (
	"log/slog"
	"net/http"
	"sync"
)

// RoundTripper is the request path a Dispatcher sends through: the client's
// RoundTrip, telling a Handle's hooks what happens to its request.
//
// RoundTripWithHooks sends req and returns the response as soon as its head
// is read, or the error that ended the request; its contract is RoundTrip's
// (it closes req's body, replays a request that failed on a re-used
// connection when that is safe, returns any status as a response). It must
// accept a nil req (and fail it as RoundTrip does). It returns once req holds
// no place in a queue and no connection but the response's.
//
// req's context is how a Handle aborts it, at any stage: when it ends, a
// request waiting for admission or a connection leaves its queue (nothing is
// written); a request being written, or whose response head is awaited, has
// its I/O interrupted and its connection closed, never re-used; and a
// response body closed after it ended is not drained, its connection is
// closed, never re-used (an HTTP/2 stream is reset instead, its connection
// kept).
type RoundTripper interface {
	RoundTripWithHooks(req *http.Request, hooks Hooks) (*http.Response, error)
}

// Hooks are what the request path tells a Handle of its request, on the
// request's goroutine (the Handle's dispatch goroutine). They may block:
// the request waits for them.
type Hooks interface {
	// Leased is told that an attempt of the request holds a connection (or a
	// stream of an HTTP/2 one), before any of the request is written. It
	// returns nil to go on, or the error of an abort that came first: the
	// request then gives the connection back unused (as it came: idle, and
	// not closed) and ends with that error, without a replay.
	Leased() error
	// Replaying is asked before a request that failed on a re-used
	// connection, before any response byte, is replayed on a new one; false
	// ends the request with err instead.
	Replaying(err error) bool
	// EarlyResponse is told that the response arrived before the request
	// body was sent in full (the server answered early, say 413); false
	// discards the response (its connection closed) and ends the request
	// with err.
	EarlyResponse(err error) bool
}

// Config is what a Dispatcher needs from its owner (the client).
type Config struct {
	RoundTrip RoundTripper
	Workers   int          // at most this many goroutines run Handler notifications (> 0)
	Go        func(func()) // starts a goroutine its owner waits for after Close
	Logger    *slog.Logger // handler panics are logged here
	// Closing reports that the owner stopped taking requests (Shutdown):
	// Send then refuses, as after Close. nil = never.
	Closing func() bool
	// ErrClosed is what a refused Send fails with; the aborts of Close are
	// errors.Is it too.
	ErrClosed error
}

// Dispatcher holds what Send adds to a client: the registry of linked Handles
// (for AbortAll and Close) and the handler workers. Its methods are safe for
// concurrent use.
type Dispatcher struct {
	cfg         Config
	workers     workers
	closedAbort error // what Await returns for a Handle that Close aborted

	mu     sync.Mutex
	live   map[*Handle]struct{}
	closed bool
}

// New returns a Dispatcher; it starts nothing until the first Send.
func New(cfg Config) *Dispatcher {
	d := &Dispatcher{cfg: cfg, live: map[*Handle]struct{}{},
		closedAbort: &abortError{msg: "connactor: handle aborted: client closed", also: cfg.ErrClosed}}
	d.workers.init(cfg.Workers, cfg.Go, cfg.Logger)
	return d
}

// Send hands req over and returns at once (see client.Client.Send): the
// request runs on a goroutine started with Config.Go, h is notified on the
// workers. It never blocks.
func (d *Dispatcher) Send(req *http.Request, h Handler) *Handle {
	hd := newHandle(d, req, h)
	if !d.register(hd) {
		closeBody(req)
		hd.refuse(d.cfg.ErrClosed)
	}
	return hd
}

// AbortAll aborts every Handle whose request is pending or in flight, or whose
// response body is still open, as Handle.Abort does (no notification follows),
// and returns once all of them have left their queues and connections.
func (d *Dispatcher) AbortAll() {
	for _, h := range d.stopAll(ErrAborted) {
		<-h.rtDone
	}
}

// stopAll aborts every linked Handle with cause, and returns those it
// stopped (not those stopped already). It marks them all stopped before it
// cancels any: a connection freed by one abort must not carry a request that
// is about to be aborted (its Leased hook refuses the connection).
func (d *Dispatcher) stopAll(cause error) []*Handle {
	hs := d.snapshot()
	n := 0
	for _, h := range hs {
		if h.markStopped(cause) {
			hs[n] = h
			n++
		}
	}
	hs = hs[:n]
	for _, h := range hs {
		h.endStopped()
	}
	return hs
}

// register records h and starts its dispatch goroutine, or reports false when
// the dispatcher is closed or its owner is closing.
func (d *Dispatcher) register(h *Handle) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.cfg.Closing != nil && d.cfg.Closing() {
		return false
	}
	d.live[h] = struct{}{}
	d.cfg.Go(func() { d.dispatch(h) }) // owned by Config.Go's owner; ends with the request's exchange
	return true
}

// GoIfOpen starts f with Config.Go, unless Close has begun (then it reports
// false). It starts the goroutine under the lock Close takes first, so that no
// goroutine is added once Close returns and the owner waits for its
// goroutines. The client's bridge for callers that are actors uses it too.
func (d *Dispatcher) GoIfOpen(f func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.cfg.Go(f)
	return true
}

func (d *Dispatcher) remove(h *Handle) {
	d.mu.Lock()
	delete(d.live, h)
	d.mu.Unlock()
}

func (d *Dispatcher) snapshot() []*Handle {
	d.mu.Lock()
	defer d.mu.Unlock()
	hs := make([]*Handle, 0, len(d.live))
	for h := range d.live {
		hs = append(hs, h)
	}
	return hs
}

// Close is called by the client's Close before anything else stops: new
// Sends are refused, every linked Handle is aborted (silently; Await returns
// an error that is both ErrAborted and Config.ErrClosed), and the workers run
// the notifications already queued for other Handles, then exit (the owner
// waits for them, with the rest of its goroutines). It does not wait for the
// aborted requests: their goroutines end as the request path lets go of them.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	d.mu.Unlock()
	d.stopAll(d.closedAbort)
	d.workers.close()
}

// dispatch runs one Handle's request on its own goroutine: the RoundTripper
// does the queueing (admission, route FIFO), the exchange and the one replay;
// the Handle's context carries Abort into all of them.
func (d *Dispatcher) dispatch(h *Handle) {
	defer close(h.rtDone)
	select {
	case <-h.stopCh:
		closeBody(h.req) // aborted before it started: never queued
		return
	default:
	}
	resp, err := d.cfg.RoundTrip.RoundTripWithHooks(h.req, (*requestHooks)(h))
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
func (d *Dispatcher) final(h *Handle, resp *http.Response, err error) {
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
func (d *Dispatcher) problem(h *Handle, err error) error {
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
		return d.cfg.ErrClosed
	}
	select {
	case e := <-answer:
		return e
	case <-h.stopCh:
		return ErrAborted
	}
}

// requestHooks is a Handle seen as its request's Hooks: a conversion, so that
// a request costs no allocation for them, and the hooks stay off the Handle's
// own methods (which users call).
type requestHooks Handle

// Leased refuses the connection of a Handle stopped meanwhile (see Handle.leased).
func (r *requestHooks) Leased() error { return (*Handle)(r).leased() }

// Replaying: a request that failed on a re-used connection is a non-fatal
// problem, which the Handle's handler may escalate to refuse the replay;
// Abort refuses it too.
func (r *requestHooks) Replaying(err error) bool { return (*Handle)(r).nonFatal(err) }

// EarlyResponse: a response that arrived before the request body was sent in
// full (the server answered early, say 413) is a non-fatal problem before
// OnResponse, which the handler may escalate: the response is then discarded
// and OnProblem(err, true) follows.
func (r *requestHooks) EarlyResponse(err error) bool { return (*Handle)(r).nonFatal(err) }

// closeBody closes the body of a request that will not be sent.
func closeBody(req *http.Request) {
	if req != nil && req.Body != nil {
		req.Body.Close()
	}
}
