package h2

import (
	"io"
	"net/http"
	"sync/atomic"
)

// Ender is told of a stream's end (see RoundTrip). An interface rather than a
// func: the caller's value that holds the stream's state is the Ender, where a
// method value would cost an allocation per stream.
type Ender interface {
	StreamEnded(err error)
}

// RoundTrip sends req on one stream and returns when the response head has
// arrived; the body streams from the connection. It takes a free stream, and
// fails at once with ErrNoStream when there is none: it never waits for a
// stream of its own accord (the engine may, after the peer lowered its limit
// under StrictMaxConcurrentRequests).
//
// The request's context bounds the whole stream, body included; its end resets
// that stream only (RST_STREAM CANCEL), never the connection. The httptrace
// hooks of the exchange (WroteHeaderField, WroteHeaders, Wait100Continue,
// Got100Continue, Got1xxResponse, WroteRequest, GotFirstResponseByte) fire as
// in net/http, whose HTTP/2 code this is. resp.Proto is "HTTP/2.0"; resp.TLS is
// set on TLS connections.
//
// done (when not nil) is told exactly once when the stream is over: with nil
// when the body was read to EOF or closed, with the error otherwise (reset by
// the server, connection lost, context ended while reading). It must not
// block. A HEAD response has no body: done is told before RoundTrip returns.
// On an error return done is not told: the stream is already over. The error
// is a *RoundTripError (see ErrRefused, ErrNoStream). req.Body is closed in
// every case, as an http.RoundTripper closes it.
func (c *Conn) RoundTrip(req *http.Request, done Ender) (*http.Response, error) {
	return c.roundTrip(req, done, nil)
}

// RoundTripBody is RoundTrip with the response body's wrapper in b, which the
// caller provides (a field of the value that holds the stream's state, say),
// where RoundTrip allocates one per stream. b must be a zero Body, used for
// this one stream only, and outlive the response body; it is resp.Body on a
// successful return (but of a HEAD request, whose body is http.NoBody).
func (c *Conn) RoundTripBody(req *http.Request, done Ender, b *Body) (*http.Response, error) {
	return c.roundTrip(req, done, b)
}

// roundTrip is RoundTrip; b (nil: one allocated) is the body's wrapper.
func (c *Conn) roundTrip(req *http.Request, done Ender, b *Body) (*http.Response, error) {
	if !c.startStream() {
		if req.Body != nil {
			req.Body.Close() // as the engine does on every path
		}
		return nil, &RoundTripError{Err: ErrNoStream}
	}
	settings := c.settingsKnown.Load()
	resp, err := c.cc.RoundTrip(req)
	if err != nil {
		rerr, refresh := c.classify(err, settings)
		c.endStream()
		if refresh {
			c.refresh(false)
		}
		return nil, rerr
	}
	if !settings && !c.settingsKnown.Load() {
		c.refresh(false) // the server's SETTINGS came before this response
	}
	if req.Method == http.MethodHead {
		// The engine waited for the end of the stream (its noBody).
		resp.Body.Close()
		resp.Body = http.NoBody
		c.endStream()
		if done != nil {
			done.StreamEnded(nil)
		}
		return resp, nil
	}
	if b == nil {
		b = new(Body)
	}
	b.rc, b.c, b.done = resp.Body, c, done
	resp.Body = b
	return resp, nil
}

// Body is a stream's response body: the engine's, which ends its stream's
// accounting exactly once, at EOF, on a read error, or on Close. Read and
// Close may be called concurrently (Close aborts a Read), as on the engine's
// body. Its zero value is what RoundTripBody fills; only RoundTripBody makes
// one readable.
type Body struct {
	rc   io.ReadCloser
	c    *Conn
	done Ender
	over atomic.Bool
}

// Read reads the engine's body, and ends the stream at EOF or on an error.
func (b *Body) Read(p []byte) (int, error) {
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
func (b *Body) Close() error {
	err := b.rc.Close()
	b.finish(nil)
	return err
}

func (b *Body) finish(err error) {
	if !b.over.CompareAndSwap(false, true) {
		return
	}
	b.c.endStream()
	if b.done != nil {
		b.done.StreamEnded(err)
	}
}
