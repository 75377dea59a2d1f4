package h2

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"golang.org/x/net/http2"

	"github.com/connactor/connactor/conn"
)

// RoundTrip sends req on one stream and returns when the response head has
// arrived; the body streams from the connection. It takes the caller's
// reservation (Reserve), or a free stream, and fails at once with ErrNoStream
// when there is neither: it never waits for a stream of its own accord (the
// engine may, after the peer lowered its limit under StrictMaxConcurrentRequests).
//
// The request's context bounds the whole stream, body included; its end resets
// that stream only (RST_STREAM CANCEL), never the connection. The httptrace
// hooks of the exchange (WroteHeaderField, WroteHeaders, Wait100Continue,
// Got100Continue, Got1xxResponse, WroteRequest, GotFirstResponseByte) fire as
// in net/http, whose HTTP/2 code this is. resp.Proto is "HTTP/2.0"; resp.TLS is
// set on TLS connections.
//
// done is called exactly once when the stream is over: with nil when the body
// was read to EOF or closed, with the error otherwise (reset by the server,
// connection lost, context ended while reading). It must not block. A HEAD
// response has no body: done is called before RoundTrip returns. On an error
// return done is not called: the stream is already over. The error is a
// *RoundTripError (see ErrRefused, ErrNoStream).
func (c *Conn) RoundTrip(req *http.Request, done func(error)) (*http.Response, error) {
	if !c.startStream() {
		return nil, &RoundTripError{Err: ErrNoStream}
	}
	resp, err := c.cc.RoundTrip(req)
	if err != nil {
		rerr, refresh := c.classify(err)
		c.endStream()
		if refresh {
			c.refresh(false)
		}
		return nil, rerr
	}
	if !c.settingsKnown.Load() {
		c.refresh(false) // the server's SETTINGS came before this response
	}
	if req.Method == http.MethodHead {
		// The engine waited for the end of the stream (its noBody).
		resp.Body.Close()
		resp.Body = http.NoBody
		c.endStream()
		if done != nil {
			done(nil)
		}
		return resp, nil
	}
	resp.Body = &body{rc: resp.Body, c: c, done: done}
	return resp, nil
}

// body ends its stream's accounting exactly once: at EOF, on a read error, or on
// Close. Read and Close may be called concurrently (Close aborts a Read), as on
// the engine's body.
type body struct {
	rc   io.ReadCloser
	c    *Conn
	done func(error)
	over atomic.Bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil {
		if err == io.EOF {
			b.finish(nil)
		} else {
			b.finish(err)
		}
	}
	return n, err
}

// Close resets the stream if the body was not read to its end (the engine sends
// RST_STREAM CANCEL), which leaves the connection and its other streams alone.
func (b *body) Close() error {
	err := b.rc.Close()
	b.finish(nil)
	return err
}

func (b *body) finish(err error) {
	if !b.over.CompareAndSwap(false, true) {
		return
	}
	b.c.endStream()
	if b.done != nil {
		b.done(err)
	}
}

// The engine's errors that say a stream never left the connection, or was
// refused, are unexported values; they are recognised by their text, pinned by
// this package's tests (x/net http2/transport_common.go).
const (
	msgGotGoAway      = "http2: Transport received Server's graceful shutdown GOAWAY"
	msgUnusable       = "http2: client conn not usable"
	msgClosed         = "http2: client conn is closed"
	msgNotEstablished = "http2: client conn could not be established"
	msgHeaderTimeout  = "http2: timeout awaiting response headers"
	msgHeaderTooLarge = "http2: response header list larger than advertised limit"
)

// classify wraps a RoundTrip error into a *RoundTripError, and reports whether
// the engine turned the stream away although the Conn's accounting allowed it
// (then its limit is worth reading again). A second REFUSED_STREAM retires the
// connection.
func (c *Conn) classify(err error) (*RoundTripError, bool) {
	msg := err.Error()
	var se http2.StreamError
	isStream := errors.As(err, &se)
	if isStream && se.Cause != nil {
		msg = se.Cause.Error() // the engine's own reason for resetting the stream
	}
	switch {
	case isStream && se.Code == http2.ErrCodeRefusedStream:
		c.refusedStream()
		return &RoundTripError{Err: fmt.Errorf("%w: %w", ErrRefused, err)}, false
	case msg == msgGotGoAway:
		return &RoundTripError{Err: fmt.Errorf("%w: %w", ErrRefused, err)}, false
	case msg == msgUnusable || msg == msgClosed || msg == msgNotEstablished:
		return &RoundTripError{Err: fmt.Errorf("%w: %w", ErrNoStream, err)}, true
	case msg == msgHeaderTimeout:
		return &RoundTripError{Sent: true, Err: fmt.Errorf("%w after %v: %w",
			conn.ErrResponseHeaderTimeout, c.opt.ResponseHeaderTimeout, err)}, false
	case msg == msgHeaderTooLarge:
		return &RoundTripError{Sent: true, Err: fmt.Errorf("%w (limit %d bytes): %w",
			conn.ErrResponseHeaderTooLarge, c.opt.MaxResponseHeaderBytes, err)}, false
	}
	return &RoundTripError{Sent: true, Err: err}, false
}

// refusedStream counts a REFUSED_STREAM; the second retires the connection.
func (c *Conn) refusedStream() {
	c.mu.Lock()
	c.refused++
	n := c.refused
	c.mu.Unlock()
	if n >= 2 && c.startDraining(ReasonRefused) {
		c.cc.SetDoNotReuse()
	}
}
