package client

import (
	"errors"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
)

// ErrLeaseTimeout is returned (wrapped) when no connection could be leased within
// Config.LeaseTimeout. The request was not sent. It is a net.Error whose
// Timeout() is true.
var ErrLeaseTimeout error = &timeoutError{"connactor: timed out waiting for a pooled connection"}

// ErrClosed is returned by every call on a client that is closed or shutting
// down, and by requests that were waiting when it closed.
var ErrClosed = errors.New("connactor: client closed")

// ErrNotSent marks failures that happened before any byte of the request was
// written: the server cannot have seen it, and replaying it is safe.
var ErrNotSent = conn.ErrNotSent

// ErrOutcomeUnknown marks failures after (part of) the request was written and
// before a complete response head arrived: the server may have acted on it.
var ErrOutcomeUnknown = conn.ErrOutcomeUnknown

// ErrStaleConn is returned (with ErrNotSent) when a pooled connection turned out
// to be closed by the server and the request could not be retried.
var ErrStaleConn = conn.ErrStaleConn

// ErrResponseHeaderTooLarge is returned when the response head exceeds
// Config.MaxResponseHeaderBytes; the connection is discarded.
var ErrResponseHeaderTooLarge = conn.ErrResponseHeaderTooLarge

// ErrResponseHeaderTimeout is returned when the response head did not arrive
// within Config.ResponseHeaderTimeout. It is a net.Error whose Timeout() is true.
var ErrResponseHeaderTimeout = conn.ErrResponseHeaderTimeout

// ErrInvalidRequest is returned (wrapped with the detail) for requests that are
// refused before anything is written: nil request or URL, missing host, invalid
// method, header names or values with CR, LF or other invalid bytes.
var ErrInvalidRequest = errors.New("connactor: invalid request")

// ErrUnsupportedScheme is returned (wrapped) for URL schemes other than http and https.
var ErrUnsupportedScheme = route.ErrUnsupportedScheme

// ErrInvalidConfig is returned (wrapped with the detail) by New for a Config it
// refuses.
var ErrInvalidConfig = errors.New("connactor: invalid config")

// ExchangeError is the type of transport failures on a connection; see
// conn.ExchangeError. errors.As(err, new(*client.ExchangeError)) gives the detail.
type ExchangeError = conn.ExchangeError

type timeoutError struct{ msg string }

func (e *timeoutError) Error() string   { return e.msg }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

// ErrAborted is returned (possibly wrapped) by Handle.Await once the Handle was
// aborted (Handle.Abort, Client.AbortAll, Client.Close) or closed (Handle.Close).
// When Client.Close aborted it, errors.Is(err, ErrClosed) holds too.
var ErrAborted = errors.New("connactor: handle aborted")

// ErrHandlerPanicked is returned (wrapped with the panic's value) by
// Handle.Await when the Handle's notification handler panicked: the panic is
// contained, logged, and becomes a fatal problem for that Handle only.
var ErrHandlerPanicked = errors.New("connactor: notification handler panicked")
