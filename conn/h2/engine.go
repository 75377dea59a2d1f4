package h2

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/http2"

	"github.com/connactor/connactor/internal/errs"
)

// This file holds every call that depends on golang.org/x/net/http2's client
// (see the package comment for why it is the engine): building it, and the
// three ways it tells a pool what happened, which the Conn turns into events.
//
//   - ClientConnPool.MarkDead: the read loop calls it when a GOAWAY arrives
//     (before failing the streams above its last stream id) and when the
//     connection is over.
//   - Transport.CountError: "conn_close_lost_ping" just before the health check
//     closes the connection, "recv_goaway_<code>" for a GOAWAY with an error.
//   - net.Conn.Close on the socket, which the engine calls whenever the
//     connection ends, whoever ended it.

// newEngine builds the x/net client connection over the wrapped socket. Each
// Conn has its own Transport: CountError and MarkDead then name their
// connection. The net/http Transport linked to it only carries configuration
// (HTTP2Config with the windows, the response header limit and timeout); it
// never dials. DisableCompression: requests go out as the caller wrote them, as
// on conn's HTTP/1.1 connections (no transparent gzip).
func (c *Conn) newEngine(nc net.Conn) (*http2.ClientConn, error) {
	t1 := &http.Transport{
		HTTP2:                  c.opt.HTTP2,
		MaxResponseHeaderBytes: c.opt.MaxResponseHeaderBytes,
		ResponseHeaderTimeout:  c.opt.ResponseHeaderTimeout,
		ExpectContinueTimeout:  c.opt.ExpectContinueTimeout,
		DisableCompression:     true,
	}
	// ConfigureTransports is how x/net's own client reads an http.HTTP2Config
	// (and the window sizes, which have no other way in).
	t2, err := http2.ConfigureTransports(t1) // deprecated for net/http users; the legacy engine's way in
	if err != nil {
		return nil, err
	}
	t2.ConnPool = pool{c}
	t2.CountError = c.countError // the legacy engine reads only this field for its client
	// The owner never starts more streams than the peer allows (Conn's own
	// accounting, and the route's above it); but a stream's end reaches the
	// owner (its body's Done) a moment before the engine forgets the stream.
	// Strict, the engine waits that moment for the slot instead of calling
	// the connection not usable, which would refuse a stream it has room for.
	t2.StrictMaxConcurrentStreams = true
	return t2.NewClientConn(nc)
}

// probeSettings learns when the server's SETTINGS have arrived: the server's
// preface is its SETTINGS frame, sent before anything else (RFC 9113 section
// 3.4), and the engine's read loop handles frames in order, so once a PING is
// acknowledged the SETTINGS have been applied. A PING that fails leaves the
// limit assumed; the health check is the engine's business.
func (c *Conn) probeSettings() {
	defer c.probe.Done()
	timeout := 15 * time.Second // net/http's default PingTimeout
	if c.opt.HTTP2 != nil && c.opt.HTTP2.PingTimeout > 0 {
		timeout = c.opt.HTTP2.PingTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := c.cc.Ping(ctx)
	cancel()
	c.refresh(err == nil)
}

// refresh reads the engine's view of the peer's limit. acked reports that a PING
// was acknowledged since the connection started, so the SETTINGS are known even
// when they announced 0 streams (which State cannot tell from "not yet").
// It is called off the hot path: after the probe, after the first response, and
// when the engine turned a stream away that the Conn's accounting allowed.
func (c *Conn) refresh(acked bool) {
	st := c.cc.State() // takes the engine's write lock: never with c.mu held
	if st.Closed {
		return
	}
	if st.MaxConcurrentStreams > 0 || acked {
		c.engineLimit(int(st.MaxConcurrentStreams))
	}
}

// pool receives the engine's MarkDead calls; GetClientConn is never used, as
// the Conn calls the ClientConn directly.
type pool struct{ c *Conn }

var errNoPool = errors.New("h2: internal error: the engine asked its pool for a connection")

func (pool) GetClientConn(*http.Request, string) (*http2.ClientConn, error) {
	return nil, errNoPool
}

// MarkDead is called by the engine's read loop on a GOAWAY, and when the
// connection is over (then State says Closed, and the socket's Close reports
// it). It must not wait: the read loop is stopped meanwhile.
func (p pool) MarkDead(cc *http2.ClientConn) {
	if cc.State().Closed {
		return
	}
	if p.c.startDraining(ReasonGoAway) {
		p.c.closeIfDrained()
	}
}

// countError records the engine's error counts that explain a close, then
// passes the count on to the configuration's CountError.
func (c *Conn) countError(errType string) {
	c.mu.Lock()
	switch {
	case errType == "conn_close_lost_ping":
		if c.cause == "" {
			c.cause = ReasonPingTimeout
		}
	default:
		c.engErr = errType
	}
	c.mu.Unlock()
	if c.opt.HTTP2 != nil && c.opt.HTTP2.CountError != nil {
		c.opt.HTTP2.CountError(errType)
	}
}

// socketClosed is called when the engine (or New) closes the socket: it reports
// Closed, once, with the reason known by then.
func (c *Conn) socketClosed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed != "" {
		return
	}
	var err error
	switch {
	case c.cause != "":
		c.closed = c.cause
		if c.cause == ReasonPingTimeout {
			err = errPingTimeout
		}
	case c.draining != "":
		c.closed = c.draining
		if strings.HasPrefix(c.engErr, "recv_goaway_") {
			err = fmt.Errorf("h2: server sent GOAWAY %s", strings.TrimPrefix(c.engErr, "recv_goaway_"))
		}
	case errors.Is(c.readErr, io.EOF) || errors.Is(c.readErr, syscall.ECONNRESET):
		c.closed, err = ReasonServerClose, c.readErr
	case c.readErr != nil:
		c.closed, err = ReasonError, c.readErr
	default:
		c.closed = ReasonError
		err = fmt.Errorf("h2: connection closed by the engine (%s)", c.engErr)
	}
	if c.ev.Closed != nil {
		c.ev.Closed(c.closed, err)
	}
}

var errPingTimeout = errors.New("h2: PING not acknowledged within PingTimeout")

// readFailed records the first error a socket read returned.
func (c *Conn) readFailed(err error) {
	c.mu.Lock()
	if c.readErr == nil {
		c.readErr = err
	}
	c.mu.Unlock()
}

// wrap puts nc behind a socket that tells the Conn about read errors and the
// close. A TLS socket keeps its ConnectionState (the engine looks for the method
// to fill resp.TLS); a plain one has none, so that h2c responses have no TLS.
func (c *Conn) wrap(nc net.Conn) (net.Conn, error) {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return &socket{Conn: nc, c: c}, nil
	}
	st := tc.ConnectionState()
	if !st.HandshakeComplete || st.NegotiatedProtocol != http2.NextProtoTLS {
		return nil, fmt.Errorf("%w (negotiated %q)", ErrNotH2, st.NegotiatedProtocol)
	}
	return &tlsSocket{socket: socket{Conn: nc, c: c}, tc: tc}, nil
}

// takeLower is the frameWatch's take: a limit no higher than the Conn's.
func (c *Conn) takeLower(v uint32) bool { return c.takeLimit(v, false) }

// socket is the engine's view of a plain connection.
type socket struct {
	net.Conn
	c *Conn
}

// Read reads for the engine's read loop, and follows the peer's SETTINGS on
// the way (frameWatch).
func (s *socket) Read(p []byte) (int, error) {
	if v, ok := s.c.watch.next(); ok {
		s.c.takeLimit(v, true)
	}
	n, err := s.Conn.Read(p)
	if n > 0 {
		s.c.watch.feed(p[:n], s.c.takeLower)
	}
	if err != nil {
		s.c.readFailed(err)
	}
	return n, err
}

func (s *socket) Close() error {
	s.c.socketClosed()
	return s.Conn.Close()
}

// tlsSocket is the engine's view of a TLS connection.
type tlsSocket struct {
	socket
	tc *tls.Conn
}

// ConnectionState is what the engine copies into resp.TLS.
func (s *tlsSocket) ConnectionState() tls.ConnectionState { return s.tc.ConnectionState() }

// Close closes the TLS connection; a peer that stopped reading could hold the
// close_notify write, so the TCP socket is closed under it after 250ms, as the
// engine does for a *tls.Conn it can see (x/net's forceCloseConn).
func (s *tlsSocket) Close() error {
	s.c.socketClosed()
	t := time.AfterFunc(250*time.Millisecond, func() { s.tc.NetConn().Close() })
	defer t.Stop()
	return s.tc.Close()
}

// The engine's errors that say a stream never left the connection, or was
// refused, are unexported values; they are recognised by their text, pinned by
// this package's tests (x/net http2/transport_common.go). Both "not usable"
// and "could not be established" come from awaitOpenSlotForStreamLocked, before
// the stream has an id; "client conn is closed" is not among them: it comes
// from the request body's writer, after the headers went out.
const (
	msgGotGoAway      = "http2: Transport received Server's graceful shutdown GOAWAY"
	msgUnusable       = "http2: client conn not usable"
	msgNotEstablished = "http2: client conn could not be established"
	msgGoAwayFirst    = "http2: Transport received GOAWAY from server ErrCode:"
	msgHeaderTimeout  = "http2: timeout awaiting response headers"
	msgHeaderTooLarge = "http2: response header list larger than advertised limit"
)

// classify wraps a RoundTrip error into a *RoundTripError, and reports whether
// the engine turned the stream away although the Conn's accounting allowed it
// (then its limit is worth reading again). A second REFUSED_STREAM retires the
// connection, counting only streams sent once the peer's limit was known
// (settings): a server refuses what a cold start sends above the 100 assumed
// streams, which says nothing about its health.
func (c *Conn) classify(err error, settings bool) (*RoundTripError, bool) {
	msg := err.Error()
	var se http2.StreamError
	isStream := errors.As(err, &se)
	if isStream && se.Cause != nil {
		msg = se.Cause.Error() // the engine's own reason for resetting the stream
	}
	switch {
	case isStream && se.Code == http2.ErrCodeRefusedStream:
		if settings {
			c.refusedStream()
		}
		return &RoundTripError{Err: fmt.Errorf("%w: %w", ErrRefused, err)}, false
	case msg == msgGotGoAway || strings.HasPrefix(msg, msgGoAwayFirst):
		// Above the GOAWAY's last stream id: unprocessed (RFC 9113 section 6.8).
		// x/net words it differently for stream 1 under an error code, which
		// it does not retry itself; one replay elsewhere is still safe.
		return &RoundTripError{Err: fmt.Errorf("%w: %w", ErrRefused, err)}, false
	case msg == msgUnusable || msg == msgNotEstablished:
		return &RoundTripError{Err: fmt.Errorf("%w: %w", ErrNoStream, err)}, true
	case msg == msgHeaderTimeout:
		return &RoundTripError{Sent: true, Err: fmt.Errorf("%w after %v: %w",
			errs.ErrResponseHeaderTimeout, c.opt.ResponseHeaderTimeout, err)}, false
	case msg == msgHeaderTooLarge:
		return &RoundTripError{Sent: true, Err: fmt.Errorf("%w (limit %d bytes): %w",
			errs.ErrResponseHeaderTooLarge, c.opt.MaxResponseHeaderBytes, err)}, false
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
