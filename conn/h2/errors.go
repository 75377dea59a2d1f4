package h2

import (
	"errors"

	"github.com/connactor/connactor/internal/errs"
)

// ErrRefused is returned (inside a *RoundTripError) when the server refused a
// stream before processing it: the stream was above the last stream id of a
// GOAWAY (RFC 9113 section 6.8), or was reset with REFUSED_STREAM (section
// 8.7). errors.Is(err, conn.ErrNotSent) holds too (client.ErrNotSent is the
// same value): replaying the request on another connection is safe whatever
// its method. The engine may have read and closed the request's Body: replay
// it with Request.GetBody.
var ErrRefused = errors.New("h2: stream refused by the server before processing")

// ErrNoStream is returned (inside a *RoundTripError) when the connection had no
// stream for the request: every stream is in use, or it is draining or closed.
// Nothing was sent: errors.Is(err, conn.ErrNotSent) holds too
// (client.ErrNotSent is the same value).
var ErrNoStream = errors.New("h2: no stream available on the connection")

// ErrNotH2 is returned by New for a TLS connection whose ALPN negotiation did not
// select "h2" (or whose handshake is not complete): speak HTTP/1.1 on it.
var ErrNotH2 = errors.New(`h2: TLS connection did not negotiate "h2"`)

// RoundTripError is the error of a failed RoundTrip. It wraps the cause
// (errors.As reaches the engine's http2.StreamError, context errors, ...) and
// says whether the request may have been acted on: errors.Is(err,
// conn.ErrNotSent) when it was not (refused, or no stream), errors.Is(err,
// conn.ErrOutcomeUnknown) otherwise (the same values as client.ErrNotSent and
// client.ErrOutcomeUnknown).
type RoundTripError struct {
	// Sent reports whether the request may have reached the server and been
	// processed. When false, replaying it elsewhere is safe whatever its method.
	Sent bool
	Err  error
}

func (e *RoundTripError) Error() string {
	if e.Sent {
		return e.Err.Error()
	}
	return e.Err.Error() + " (not sent)"
}

// Unwrap returns the cause and the classification sentinel.
func (e *RoundTripError) Unwrap() []error {
	if e.Sent {
		return []error{e.Err, errs.ErrOutcomeUnknown}
	}
	return []error{e.Err, errs.ErrNotSent}
}

// Timeout reports whether the cause was a timeout (the response header timeout,
// a context deadline), as net.Error callers expect.
func (e *RoundTripError) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.Err, &t) && t.Timeout()
}

// Temporary is Timeout, completing net.Error.
func (e *RoundTripError) Temporary() bool { return e.Timeout() }
