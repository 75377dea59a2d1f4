package client

import (
	"context"
	"net/http"

	"github.com/connactor/connactor/internal/dispatch"
)

// Handler is notified of a Handle's outcome:
//
//	type Handler interface {
//		// OnResponse delivers the response as soon as its head is read. The body
//		// streams from the connection, which stays leased until the body is read
//		// to its end or closed (resp.Body.Close or Handle.Close): process responses
//		// as they arrive, or the pool runs dry.
//		OnResponse(h *Handle, resp *http.Response)
//		// OnProblem reports a problem; for a non-fatal one, returning true makes it
//		// fatal. A fatal problem is the final notification: the request is over and
//		// holds no connection. The non-fatal problems are:
//		//   - a request that failed on a re-used connection before any response
//		//     byte and is about to be replayed on a fresh one (errors.Is ErrNotSent
//		//     or ErrOutcomeUnknown); returning true refuses the replay (a
//		//     connection found closed before anything was written to it is no
//		//     problem: the request goes out on another one);
//		//   - a response that arrived before the request body was sent in full
//		//     (errors.Is ErrEarlyResponse: the server answered early, e.g. 413 or
//		//     401 to a large upload); its connection is not re-used; returning true
//		//     discards the response.
//		// Either way, when made fatal, OnProblem(h, err, true) follows.
//		OnProblem(h *Handle, err error, fatal bool) (makeFatal bool)
//	}
//
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
type Handler = dispatch.Handler

// HandlerFuncs adapts two functions to Handler; a nil field ignores that
// notification (a nil Problem never escalates). A response nobody handles
// stays open until it is closed through Await or Handle.Close.
//
//	type HandlerFuncs struct {
//		Response func(*Handle, *http.Response)   // as Handler.OnResponse
//		Problem  func(*Handle, error, bool) bool // as Handler.OnProblem
//	}
type HandlerFuncs = dispatch.HandlerFuncs

// Handle is one request handed over with Client.Send.
// Its methods are safe for concurrent use.
//
// A Handle is linked (Linked) from Send until the client holds nothing more
// for it: its request failed, its response body was read to the end or closed,
// or it was closed or aborted. A linked Handle with a response holds that
// response's connection: applications must process responses as they arrive
// (read the body to its end, or Close), or the pool runs dry. Stats shows such
// a Handle as the age of the oldest unreleased lease (Stats.OldestLease).
//
//	func (h *Handle) Request() *http.Request
//
// Request returns the request as it was passed to Send.
//
//	func (h *Handle) Await(ctx context.Context) (*http.Response, error)
//
// Await blocks until the Handle's outcome is known or ctx ends, and returns it:
// the response (whose body streams from its connection: read it to the end or
// Close), or the error that ended the request. It does not wait for the
// notification handler, and may be called from it, any number of times.
// After Abort or Close it returns an error wrapping ErrAborted; when ctx ends
// first it returns ctx's error and leaves the request running.
//
//	func (h *Handle) Close() error
//
// Close says the application is done with the response: its body is closed
// (a small unread rest is drained so the connection can be re-used, a large
// one closes it) and the Handle is unlinked. Before the response has arrived,
// Close aborts the request as Abort does. No notification starts after Close;
// later Awaits return an error wrapping ErrAborted. It returns the body's Close
// error; later calls return nil.
//
//	func (h *Handle) Abort()
//
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
//
//	func (h *Handle) Linked() bool
//
// Linked reports whether the Handle is still tied to the client: its request is
// pending or in flight, or its response body is open. Once false, it stays
// false. The answer may be stale by the time it is used.
type Handle = dispatch.Handle

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
func (c *Client) Send(req *http.Request, h Handler) *Handle { return c.disp.Send(req, h) }

// AbortAll aborts every Handle whose request is pending or in flight, or whose
// response body is still open, as Handle.Abort does (no notification follows),
// and returns once all of them have left their queues and connections. Handles
// sent while it runs may be spared. The client stays usable. Safe for
// concurrent use, and from a notification handler.
func (c *Client) AbortAll() { c.disp.AbortAll() }

// SendAll sends reqs through c with at most limit of them in flight (limit <= 0
// means all at once) and waits for all of them, in the spirit of .NET's
// Task.WhenAll. Each response is handed to read as soon as it arrives, on one of
// SendAll's own goroutines, and closed when read returns; SendAll returns read's
// results in the order of reqs.
//
// The first failure (a transport error, an error from read, or ctx ending) ends
// the fan-out: requests still waiting for a connection leave their queues,
// responses being read are discarded with their connections, requests not yet
// sent are never sent (their bodies are closed), and SendAll returns that first
// error and no results. A panic in read is re-raised on the caller's goroutine,
// after the rest is aborted.
//
// Responses are read as they arrive on purpose: each unread response holds a
// connection, and holding them all until the last arrives would starve the
// requests still waiting for one. read must not keep the body after it returns.
//
// SendAll blocks until every request is over. It uses up to limit goroutines of
// its own, plus Send's per request.
func SendAll[T any](ctx context.Context, c *Client, reqs []*http.Request, limit int, read func(*http.Response) (T, error)) ([]T, error) {
	return dispatch.SendAll(ctx, c.disp, reqs, limit, read)
}

// hooked is the client as its dispatcher sees it: a dispatch.RoundTripper,
// whose RoundTripWithHooks is roundTrip. A conversion of *Client, so that the
// method stays out of the client's own API.
type hooked Client

func (c *hooked) RoundTripWithHooks(req *http.Request, hooks dispatch.Hooks) (*http.Response, error) {
	return (*Client)(c).roundTrip(req, hooks)
}
