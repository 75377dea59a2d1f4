package h2

import (
	"context"
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

// Home is where RoundTripAt starts a foreign caller's stream, and reads its
// body: the client's home goroutine (internal/wait's Home). Do runs f there
// and reports false once home has ended; Chan returns a channel made there.
type Home interface {
	Do(f func()) bool
	Chan() chan struct{}
}

// RoundTripAt is RoundTripBody for a caller in a testing/synctest bubble
// that the connection is not in (internal/wait's Home.Foreign). The engine makes a
// stream's channels on the goroutine that starts it, and its read loop,
// outside the bubble, closes them: the stream is started from a goroutine of
// home's instead, with a context of its own that the caller's context ends
// (for the whole stream, body included, as in RoundTrip). The caller blocks
// until the response head arrives, or the stream fails.
func (c *Conn) RoundTripAt(home Home, req *http.Request, done Ender, b *Body) (*http.Response, error) {
	if b == nil {
		b = new(Body)
	}
	ctx := req.Context()
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx)) // its channel is made by the engine, at home
	stop := context.AfterFunc(ctx, cancel)
	end := &foreignEnd{done: done, stop: stop, cancel: cancel, starting: true}
	sreq := req.WithContext(sctx)
	ready := home.Chan()
	var resp *http.Response
	var err error
	started := home.Do(func() {
		go func() { // owned by the caller, which waits for it below
			resp, err = c.roundTrip(sreq, end, b)
			close(ready)
		}()
	})
	if started {
		<-ready
		end.started() // a HEAD's end, told at home, is passed on here, in the caller's bubble
	} else {
		resp, err = c.roundTrip(sreq, end, b) // home has ended with the client: the connection is closing
	}
	if err != nil {
		end.over()
		return nil, err
	}
	if resp.Request == sreq {
		resp.Request = req
	}
	if resp.Body == b {
		b.rc = &homeReader{rc: b.rc, home: home}
	}
	return resp, nil
}

// homeReader reads and closes a foreign stream's body on goroutines of
// home's. The engine's body blocks in a sync.Cond until the read loop,
// outside the caller's bubble, signals it, and its Close makes channels that
// the stream's goroutines wait on: the runtime kills the process when a
// goroutine outside a bubble wakes one of the bubble's, or uses a channel
// made in it. The caller blocks on a channel of home's instead.
type homeReader struct {
	rc   io.ReadCloser
	home Home
}

func (r *homeReader) Read(p []byte) (n int, err error) {
	r.atHome(func() { n, err = r.rc.Read(p) })
	return n, err
}

func (r *homeReader) Close() (err error) {
	r.atHome(func() { err = r.rc.Close() })
	return err
}

// atHome runs f on a goroutine of home's and waits for it; once home has
// ended with the client (the stream is over), on this one.
func (r *homeReader) atHome(f func()) {
	ready := r.home.Chan()
	started := r.home.Do(func() {
		go func() { // owned by the caller, which waits for it below
			f()
			close(ready)
		}()
	})
	if !started {
		f()
		return
	}
	<-ready
}

// foreignEnd is the Ender of a stream started by RoundTripAt: it lets the
// caller's context go when the stream is over. An end told while the
// stream starts at home (a HEAD's, before roundTrip returns) is held until
// the caller has the answer, and passed on from the caller's goroutine:
// the caller's Ender may close channels of its bubble.
type foreignEnd struct {
	done   Ender
	stop   func() bool
	cancel context.CancelFunc
	// starting is set until the caller has roundTrip's answer; held and
	// heldErr keep an end told meanwhile. Written by home's goroutine and
	// then read by the caller after the ready channel: never at once.
	starting, held bool
	heldErr        error
}

func (e *foreignEnd) StreamEnded(err error) {
	if e.starting {
		e.held, e.heldErr = true, err
		return
	}
	e.over()
	if e.done != nil {
		e.done.StreamEnded(err)
	}
}

// started passes on an end held while the stream started.
func (e *foreignEnd) started() {
	e.starting = false
	if e.held {
		e.StreamEnded(e.heldErr)
	}
}

func (e *foreignEnd) over() {
	e.stop()
	e.cancel()
}
