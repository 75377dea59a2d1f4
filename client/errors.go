package client

import (
	"errors"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/internal/dispatch"
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
var ErrLeaseTimeout = actors.ErrLeaseTimeout

// ErrClosed is returned by every call on a client that is closed or shutting
// down, and by requests that were waiting when it closed. It is returned
// unwrapped.
var ErrClosed = actors.ErrClosed

// ErrNotSent marks failures that happened before any byte of the request was
// written: the server cannot have seen it, and replaying it is safe. Test with
// errors.Is; the error also wraps the cause.
var ErrNotSent = actors.ErrNotSent

// ErrOutcomeUnknown marks failures after (part of) the request was written and
// before a complete response head arrived: the server may have acted on it.
// Test with errors.Is; the error also wraps the cause (a *net.OpError, io.EOF,
// ErrResponseHeaderTimeout, the context's error, ...).
var ErrOutcomeUnknown = actors.ErrOutcomeUnknown

// ErrStaleConn is returned (with ErrNotSent) when a pooled connection turned out
// to be closed by the server, or to carry bytes nobody asked for, as it was
// leased, and the request could not be retried (the one retry was spent).
var ErrStaleConn = actors.ErrStaleConn

// ErrResponseHeaderTooLarge is returned (with ErrOutcomeUnknown) when the
// response head exceeds Config.MaxResponseHeaderBytes. The reading stops at the
// limit and the connection is discarded.
var ErrResponseHeaderTooLarge = actors.ErrResponseHeaderTooLarge

// ErrResponseHeaderTimeout is returned (with ErrOutcomeUnknown) when the response
// head did not arrive within Config.ResponseHeaderTimeout after the request was
// written. It is a net.Error whose Timeout() is true.
var ErrResponseHeaderTimeout = actors.ErrResponseHeaderTimeout

// ErrInvalidRequest is returned (with ErrNotSent) for requests refused before
// anything is written: nil request or URL, invalid method or Host, header
// names or values with CR, LF or other invalid bytes. The message is
// net/http's ("net/http: invalid header field value for \"X\"", ...), which
// libraries match.
var ErrInvalidRequest = actors.ErrInvalidRequest

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
type ExchangeError = actors.ExchangeError

// ProxyConnectError is returned (wrapped) when the proxy refuses a CONNECT
// tunnel, e.g. 407 for missing or wrong proxy credentials or 502 when it cannot
// reach the target. The request was not sent.
// errors.As(err, new(*client.ProxyConnectError)) gives the proxy's status.
type ProxyConnectError = actors.ProxyConnectError

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
var ErrQueueFull = actors.ErrQueueFull

// ErrOverloaded is returned when the request waited in its route's queue
// while the queue stood longer than Config.QueueTarget: the route sheds such
// callers at once, oldest first (README, "When an upstream slows down"). It
// is also ErrNotSent: nothing of the request reached the server; retry
// later, elsewhere, or shed the load.
var ErrOverloaded = actors.ErrOverloaded

// ErrRouteUnavailable is returned while the request's route fails fast: its
// dials kept failing (Config.FailFastAfter), and the route refuses callers at
// once until a probe dial succeeds after its cool-down. It is also ErrNotSent.
// The last dial's error stays reachable with errors.As.
var ErrRouteUnavailable = actors.ErrRouteUnavailable

// ErrEarlyResponse marks a response that arrived before the request body was
// sent in full: the server answered early (413, 401, ... before reading an
// upload), and the write was stopped. RoundTrip returns such a response (as
// net/http does); Send's handlers hear of it first as a non-fatal problem
// (errors.Is(err, ErrEarlyResponse)). Its connection is not re-used.
var ErrEarlyResponse = actors.ErrEarlyResponse
