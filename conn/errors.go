package conn

import (
	"errors"
	"fmt"

	"github.com/connactor/connactor/internal/errs"
)

// ErrNotSent marks failures that happened before any byte of the request reached
// the connection: replaying the request is safe whatever its method.
// Test with errors.Is.
var ErrNotSent = errs.ErrNotSent

// ErrOutcomeUnknown marks failures after the request (or part of it) was written
// and before a complete response head was read: the server may have acted on it.
// Only idempotent or explicitly idempotency-keyed requests may be replayed.
var ErrOutcomeUnknown = errs.ErrOutcomeUnknown

// ErrStaleConn is returned (wrapped with ErrNotSent) when a pooled connection was
// found closed by the server, or sending unsolicited bytes, when it was leased.
var ErrStaleConn = errors.New("pooled connection was closed by the server")

// errUnsolicited is the cause (under ErrStaleConn) when an idle connection
// received bytes nobody asked for.
var errUnsolicited = errors.New("server sent unsolicited bytes on an idle connection")

// errConnGone answers an exchange meant for a connection that closed while
// its actor went on to serve another (ExchangeRequest.ConnID): it is
// ErrStaleConn, so the request, never written, is retried on another.
var errConnGone = fmt.Errorf("%w: the leased connection is gone", ErrStaleConn)

// errPeerClosed is the cause (under ErrStaleConn) when a pooled connection's
// socket holds the server's FIN.
var errPeerClosed = errors.New("server closed the idle connection")

// ErrResponseHeaderTooLarge is returned when the response head exceeds
// Options.MaxResponseHeaderBytes. The connection is discarded.
var ErrResponseHeaderTooLarge = errs.ErrResponseHeaderTooLarge

// ErrResponseHeaderTimeout is returned when the response head did not arrive within
// Options.ResponseHeaderTimeout. It is a net.Error whose Timeout() is true.
var ErrResponseHeaderTimeout = errs.ErrResponseHeaderTimeout

// ExchangeError is the error of a failed exchange on a connection. It wraps the
// cause (errors.As reaches *net.OpError and friends) and says how far the exchange
// got, so the client can decide whether a replay is safe: errors.Is(err, ErrNotSent)
// when nothing was written, errors.Is(err, ErrOutcomeUnknown) otherwise.
type ExchangeError struct {
	Op      string // "dial", "write", "read"
	Written bool   // some bytes of the request reached the socket
	GotByte bool   // some bytes of the response were read
	Reused  bool   // the connection had served earlier requests
	Err     error
}

func (e *ExchangeError) Error() string {
	state := "nothing sent"
	if e.Written {
		state = "request sent"
	}
	if e.GotByte {
		state = "response started"
	}
	return fmt.Sprintf("connactor: %s (%s): %v", e.Op, state, e.Err)
}

// Unwrap returns the cause and the classification sentinel.
func (e *ExchangeError) Unwrap() []error {
	if e.Written {
		return []error{e.Err, ErrOutcomeUnknown}
	}
	return []error{e.Err, ErrNotSent}
}

// Timeout reports whether the cause was a timeout, so that callers treating the
// error as a net.Error see deadlines as net/http reports them.
func (e *ExchangeError) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}

// ErrEarlyResponse is wrapped by ExchangeResponse.Early (an
// *EarlyResponseError): the server's final response arrived before the
// request's body was sent in full, and the rest of the body was not sent. The
// response is the server's answer all the same; the connection is not re-used.
var ErrEarlyResponse = errors.New("response arrived before the request body was sent in full")

// EarlyResponseError describes an early response (see ErrEarlyResponse and
// ExchangeResponse.Early): errors.Is(err, ErrEarlyResponse) holds, and so does
// errors.Is(err, WriteErr) when the write failed.
type EarlyResponseError struct {
	StatusCode int   // the early response's status
	WriteErr   error // the socket's error if the write failed (the server closed); nil if the client stopped it
}

func (e *EarlyResponseError) Error() string {
	if e.WriteErr != nil {
		return fmt.Sprintf("connactor: %v (status %d): write: %v", ErrEarlyResponse, e.StatusCode, e.WriteErr)
	}
	return fmt.Sprintf("connactor: %v (status %d): the rest was not sent", ErrEarlyResponse, e.StatusCode)
}

// Unwrap returns ErrEarlyResponse and the write's error, if any.
func (e *EarlyResponseError) Unwrap() []error {
	if e.WriteErr != nil {
		return []error{ErrEarlyResponse, e.WriteErr}
	}
	return []error{ErrEarlyResponse}
}

// RequestBodyError is the error of an exchange whose request body failed: its
// Read returned Err, or net/http refused it (a body shorter than its
// ContentLength, say). errors.Is(err, Err) holds, as with net/http. It is not
// an *ExchangeError: the connection did not fail, the request did; and it is
// not replayable, since its body failed. The connection is closed (the request
// on the wire is incomplete). When the response had already been returned, its
// body's Read returns this error.
type RequestBodyError struct {
	Err     error
	Written bool // some bytes of the request reached the socket
}

func (e *RequestBodyError) Error() string {
	return "connactor: reading the request body: " + e.Err.Error()
}

// Unwrap returns Err and, as ExchangeError does, ErrOutcomeUnknown when some of
// the request was written, ErrNotSent otherwise.
func (e *RequestBodyError) Unwrap() []error {
	if e.Written {
		return []error{e.Err, ErrOutcomeUnknown}
	}
	return []error{e.Err, ErrNotSent}
}

// ErrConnActorFailed is the cause of an exchange whose connection actor
// stopped before answering it: it failed (panicked and was stopped), or it
// stopped with its route. The connection is closed; nothing was written
// unless the error says so.
var ErrConnActorFailed = errors.New("connection actor failed")

// errNotDialed is the outcome of a dial asked for, from a testing/synctest
// bubble, once the client's life had ended: no dial worker takes it.
var errNotDialed = errors.New("conn: not dialed: the client is closing")
