package client

import (
	"errors"

	"github.com/connactor/connactor/internal/dispatch"
	"github.com/connactor/connactor/internal/errs"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
)

// Errors of RoundTrip fall in two families that callers can tell apart with
// errors.Is, whatever else the error wraps:
//
//   - errors.Is(err, ErrNotSent): no byte of the request reached a server (the
//     request was refused, waited in vain for a connection, the dial failed, or
//     the pooled connection was found dead before writing). Sending it again is
//     safe, whatever its method.
//   - errors.Is(err, ErrOutcomeUnknown): (part of) the request was written and no
//     complete response head came back. The server may have acted on it; only an
//     idempotent request should be sent again.
//
// Two exceptions are returned as they are: ErrClosed (nothing was sent), and a
// server certificate that does not verify, which is the
// *tls.CertificateVerificationError itself, as net/http returns it (nothing
// was sent either; code that type-switches on url.Error.Err sees it).
// Causes are kept: errors.As(err, new(*net.OpError)), errors.Is(err,
// context.DeadlineExceeded) and errors.As(err, new(*ExchangeError)) work through
// the wrapping. Errors that happen while reading a response body are the body's
// own (io.ErrUnexpectedEOF, the context's error, ...).

// ErrLeaseTimeout is returned (wrapped, with ErrNotSent) when no connection could
// be leased, or the request not admitted under MaxConcurrentRequests, within
// Config.LeaseTimeout. It is a net.Error whose Timeout() is true, and so is the
// error that wraps it: through http.Client, url.Error.Timeout() and
// os.IsTimeout report true. The message names the request's URL and how long
// it waited.
var ErrLeaseTimeout = errs.Timeout("connactor: timed out waiting for a pooled connection", "lease_timeout")

// ErrClosed is returned by every call on a client that is closed or shutting
// down, and by requests that were waiting when it closed. It is returned
// unwrapped.
var ErrClosed = errors.New("connactor: client closed")

// ErrNotSent marks failures that happened before any byte of the request was
// written: the server cannot have seen it, and replaying it is safe. Test with
// errors.Is; the error also wraps the cause.
var ErrNotSent = conn.ErrNotSent

// ErrOutcomeUnknown marks failures after (part of) the request was written and
// before a complete response head arrived: the server may have acted on it.
// Test with errors.Is; the error also wraps the cause (a *net.OpError, io.EOF,
// ErrResponseHeaderTimeout, the context's error, ...).
var ErrOutcomeUnknown = conn.ErrOutcomeUnknown

// ErrStaleConn is returned (with ErrNotSent) when a pooled connection turned out
// to be closed by the server, or to carry bytes nobody asked for, as it was
// leased, and the request could not be retried (the one retry was spent).
var ErrStaleConn = conn.ErrStaleConn

// ErrResponseHeaderTooLarge is returned (with ErrOutcomeUnknown) when the
// response head exceeds Config.MaxResponseHeaderBytes. The reading stops at the
// limit and the connection is discarded.
var ErrResponseHeaderTooLarge = conn.ErrResponseHeaderTooLarge

// ErrResponseHeaderTimeout is returned (with ErrOutcomeUnknown) when the response
// head did not arrive within Config.ResponseHeaderTimeout after the request was
// written. It is a net.Error whose Timeout() is true.
var ErrResponseHeaderTimeout = conn.ErrResponseHeaderTimeout

// ErrInvalidRequest is returned (with ErrNotSent) for requests refused before
// anything is written: nil request or URL, invalid method or Host, header
// names or values with CR, LF or other invalid bytes. The message is
// net/http's ("net/http: invalid header field value for \"X\"", ...), which
// libraries match.
var ErrInvalidRequest = errors.New("connactor: invalid request")

// ErrUnsupportedScheme is returned (wrapped, with ErrNotSent) for URL schemes
// other than http and https, as net/http words it: `unsupported protocol
// scheme "ftp"`.
var ErrUnsupportedScheme = route.ErrUnsupportedScheme

// ErrInvalidConfig is returned (wrapped with the detail) by New for a Config it
// refuses.
var ErrInvalidConfig = errors.New("connactor: invalid config")

// ExchangeError is the type of transport failures on a connection, dials
// included (Op "dial"). errors.As(err,
// new(*client.ExchangeError)) gives how far the exchange got.
type ExchangeError = conn.ExchangeError

// ProxyConnectError is returned (wrapped) when the proxy refuses a CONNECT
// tunnel, e.g. 407 for missing or wrong proxy credentials or 502 when it cannot
// reach the target. The request was not sent.
// errors.As(err, new(*client.ProxyConnectError)) gives the proxy's status.
type ProxyConnectError = conn.ProxyConnectError

// notSentError marks err as a failure before anything was sent. It keeps err's
// message and chain: errors.Is finds both err's sentinels and ErrNotSent.
type notSentError struct{ err error }

func notSent(err error) error { return &notSentError{err} }

func (e *notSentError) Error() string   { return e.err.Error() }
func (e *notSentError) Unwrap() []error { return []error{e.err, ErrNotSent} }

// Timeout reports whether the cause is a timeout (ErrLeaseTimeout, a
// deadline), so that http.Client's *url.Error says Timeout() and
// os.IsTimeout holds, as for net/http's own timeouts.
func (e *notSentError) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.err, &t) && t.Timeout()
}

// ErrAborted is returned (possibly wrapped) by Handle.Await once the Handle was
// aborted (Handle.Abort, Client.AbortAll, Client.Close) or closed (Handle.Close).
// When Client.Close aborted it, errors.Is(err, ErrClosed) holds too.
var ErrAborted = dispatch.ErrAborted

// ErrHandlerPanicked is returned (wrapped with the panic's value) by
// Handle.Await when the Handle's notification handler panicked: the panic is
// contained, logged, and becomes a fatal problem for that Handle only.
var ErrHandlerPanicked = dispatch.ErrHandlerPanicked

// ErrQueueFull is returned when MaxPendingPerRoute callers already wait on the
// request's route: the request fails at once, without waiting. It is also
// ErrNotSent (errors.Is(err, ErrNotSent) holds for it and for the errors that
// wrap it): retry elsewhere, later, or shed the load. Other routes are not
// affected.
var ErrQueueFull error = &policyError{msg: "connactor: route's wait queue is full", kind: "queue_full"}

// ErrRouteUnavailable is returned while the request's route fails fast: its
// dials kept failing (Config.FailFastAfter), and the route refuses callers at
// once until a probe dial succeeds after its cool-down. It is also ErrNotSent.
// The last dial's error stays reachable with errors.As.
var ErrRouteUnavailable error = &policyError{msg: "connactor: route unavailable: its dials keep failing", kind: "route_unavailable"}

// policyError is a request refused by a pool policy, before anything was sent.
type policyError struct{ msg, kind string }

func (e *policyError) Error() string        { return e.msg }
func (e *policyError) Is(target error) bool { return target == ErrNotSent }
func (e *policyError) ErrorType() string    { return e.kind }

// wrapped is err, with cause reachable too (errors.Is and errors.As see both).
type wrapped struct{ err, cause error }

func (w *wrapped) Error() string   { return w.err.Error() }
func (w *wrapped) Unwrap() []error { return []error{w.err, w.cause} }

// ErrEarlyResponse marks a response that arrived before the request body was
// sent in full: the server answered early (413, 401, ... before reading an
// upload), and the write was stopped. RoundTrip returns such a response (as
// net/http does); Send's handlers hear of it first as a non-fatal problem
// (errors.Is(err, ErrEarlyResponse)). Its connection is not re-used.
var ErrEarlyResponse = conn.ErrEarlyResponse
