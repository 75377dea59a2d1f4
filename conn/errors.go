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
