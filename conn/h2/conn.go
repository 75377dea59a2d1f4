package h2

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/connactor/connactor/route"
)

// assumedStreams is the stream limit assumed until the peer's SETTINGS arrive:
// what the engine itself allows (x/net's initialMaxConcurrentStreams), and what
// golang/go#39389 settled on so that a cold start does not dial one connection
// per request.
const assumedStreams = 100

// Options configure a Conn. The zero value is usable.
type Options struct {
	// HTTP2 is net/http's HTTP/2 configuration; nil means net/http's defaults.
	// MaxConcurrentStreams is a local cap on the streams of the connection (0 =
	// the peer's limit only); SendPingTimeout and PingTimeout are the health
	// check (a PING after SendPingTimeout without a frame, the connection
	// closed with ReasonPingTimeout when its ack takes longer than PingTimeout);
	// MaxReadFrameSize, MaxReceiveBufferPerConnection/PerStream (the flow
	// control windows), the header table sizes, WriteByteTimeout and
	// StrictMaxConcurrentRequests are passed to the engine; CountError is
	// called as well as the Conn's own counting.
	HTTP2 *http.HTTP2Config
	// MaxResponseHeaderBytes bounds a response head (0 = net/http's 1 MiB);
	// a larger one fails with conn.ErrResponseHeaderTooLarge.
	MaxResponseHeaderBytes int64
	// ResponseHeaderTimeout bounds the wait for a response head after the
	// request is written (0 = none); it fails with conn.ErrResponseHeaderTimeout
	// and resets only that stream.
	ResponseHeaderTimeout time.Duration
	// ExpectContinueTimeout is how long a request with "Expect: 100-continue"
	// waits for 100 Continue before sending its body (0 = send at once).
	ExpectContinueTimeout time.Duration
	// Events are the callbacks of the connection's owner.
	Events Events
}

// Events are the callbacks through which a Conn reports what its owner cannot
// see from its own calls. They are called one at a time, in order, while the
// Conn holds its lock, from whichever goroutine noticed the change (the
// engine's read loop, a caller's, the SETTINGS probe): they must not block and
// must not call the Conn. A nil callback is skipped. Closed is always the last.
type Events struct {
	// StreamsChanged reports a new stream limit: the peer's SETTINGS arrived
	// (Settings becomes true) or changed MAX_CONCURRENT_STREAMS. It is not
	// called for each stream that starts or ends.
	StreamsChanged func(Streams)
	// Draining reports, once, that the connection takes no new streams: the
	// server sent GOAWAY (ReasonGoAway; streams at or below its last stream id
	// finish, the others fail with ErrRefused), it refused two streams
	// (ReasonRefused). The connection closes when its last stream ends.
	Draining func(Reason)
	// Closed reports, once, that the connection is closed, why, and the error
	// behind it when there is one: the socket's read error, the GOAWAY's error
	// code when it arrived while streams were in flight, nil for ReasonLocal and
	// a graceful drain.
	// Streams still open fail; their bodies' Done callbacks fire as they are
	// read or closed.
	Closed func(Reason, error)
}

// Reason says why a connection drains or closed. It is the pool's close
// reason (route.CloseReason); the constants below name the values a
// connection reports.
type Reason = route.CloseReason

const (
	// ReasonGoAway: the server sent GOAWAY.
	ReasonGoAway = route.ReasonGoAway
	// ReasonRefused: the server refused two streams with REFUSED_STREAM after its
	// SETTINGS arrived, and the connection retired itself (OkHttp's rule).
	ReasonRefused = route.ReasonRefusedStreams
	// ReasonLocal: the owner called Close (the connection is not to be used
	// again).
	ReasonLocal = route.ReasonNotReusable
	// ReasonPingTimeout: the health check's PING was not answered within
	// HTTP2Config.PingTimeout.
	ReasonPingTimeout = route.ReasonPingTimeout
	// ReasonServerClose: the server closed (or reset) the connection without
	// GOAWAY.
	ReasonServerClose = route.ReasonServerClosed
	// ReasonError: a read, write or protocol error.
	ReasonError = route.ReasonError
)

// Streams is a snapshot of a connection's stream accounting.
type Streams struct {
	// Limit is min(the peer's SETTINGS_MAX_CONCURRENT_STREAMS, the local cap);
	// 100 (or the local cap) is assumed until Settings.
	Limit int
	// Settings reports that the peer's SETTINGS arrived: Limit is no longer
	// assumed.
	Settings bool
	// Active counts streams started by RoundTrip and not over yet (Done not
	// called).
	Active int
	// Available is Limit-Active, and 0 once draining or closed.
	Available int
	// Draining and Closed are set once Draining and Closed were reported.
	Draining, Closed bool
}

// Conn is one HTTP/2 client connection. Its methods are safe for concurrent use.
// Only RoundTrip (for its response head) and Close (for the socket's close)
// wait for the network; Streams is cheap enough for a caller that must not
// block.
type Conn struct {
	cc       *http2.ClientConn
	ev       Events
	localCap int // 0 = none
	opt      Options
	probe    sync.WaitGroup // the SETTINGS probe; Close waits for it

	settingsKnown atomic.Bool // mirrors settings, read without the lock on the hot path
	watch         frameWatch  // the engine's read loop's only (socket.Read): the peer's SETTINGS

	mu       sync.Mutex // guards the fields below, and serializes the events
	peerMax  int        // the peer's MAX_CONCURRENT_STREAMS, assumedStreams until settings
	settings bool
	watched  bool // a SETTINGS frame named the peer's limit (frameWatch): the engine's is not read
	active   int
	refused  int    // REFUSED_STREAM resets seen
	draining Reason // "" while the connection takes new streams
	closed   Reason // "" until Closed was reported
	cause    Reason // a closing reason known before the socket closes (ping, local)
	readErr  error  // the first error a socket read returned
	engErr   string // the last error type the engine counted (CountError)
	reported Streams
}

// New starts an HTTP/2 connection on nc, which the caller has dialled: a
// *tls.Conn whose handshake is complete and selected "h2" by ALPN, or a plain
// connection for h2c with prior knowledge (RFC 9113 section 3.3). It writes the
// client preface and SETTINGS without waiting for the server's, and starts the
// engine's read loop and a probe that learns when the server's SETTINGS arrive.
// The Conn owns nc from then on: New closes it when it fails (and Closed may
// then have been reported). Close the Conn when done.
func New(nc net.Conn, opt Options) (*Conn, error) {
	c := &Conn{ev: opt.Events, opt: opt, peerMax: assumedStreams}
	if opt.HTTP2 != nil && opt.HTTP2.MaxConcurrentStreams > 0 {
		c.localCap = opt.HTTP2.MaxConcurrentStreams
	}
	c.reported = c.snapshotLocked()
	wrapped, err := c.wrap(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	cc, err := c.newEngine(wrapped)
	if err != nil {
		wrapped.Close()
		return nil, err
	}
	c.cc = cc
	c.probe.Add(1)
	go c.probeSettings() // owned by the Conn: Close waits for it
	return c, nil
}

// Streams returns a snapshot of the stream accounting. It does not block.
func (c *Conn) Streams() Streams {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked()
}

// Close closes the connection now: streams in flight fail, and Closed is
// reported with ReasonLocal unless it was already. It waits for the Conn's
// probe goroutine; the engine's read loop ends on its own as the socket closes.
// Later calls do nothing.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.cause == "" {
		c.cause = ReasonLocal
	}
	c.mu.Unlock()
	c.cc.Close()
	c.probe.Wait()
	return nil
}

// limitLocked is min(peer's limit, local cap).
func (c *Conn) limitLocked() int {
	if c.localCap > 0 && c.localCap < c.peerMax {
		return c.localCap
	}
	return c.peerMax
}

func (c *Conn) availableLocked() int {
	if c.draining != "" || c.closed != "" {
		return 0
	}
	return max(0, c.limitLocked()-c.active)
}

func (c *Conn) snapshotLocked() Streams {
	return Streams{
		Limit:     c.limitLocked(),
		Settings:  c.settings,
		Active:    c.active,
		Available: c.availableLocked(),
		Draining:  c.draining != "",
		Closed:    c.closed != "",
	}
}

// startStream takes a free stream for RoundTrip. It reports false when there
// is none.
func (c *Conn) startStream() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.availableLocked() == 0 {
		return false
	}
	c.active++
	return true
}

// endStream ends a stream started by startStream, and closes a draining
// connection that has nothing left in flight.
func (c *Conn) endStream() {
	c.mu.Lock()
	c.active--
	if c.active < 0 {
		c.mu.Unlock()
		panic("h2: internal error: stream ended twice")
	}
	idle := c.drainedLocked()
	c.mu.Unlock()
	if idle {
		c.cc.Close()
	}
}

// drainedLocked reports a draining connection with nothing in flight, which
// the caller closes (outside the lock: closing reports Closed).
func (c *Conn) drainedLocked() bool {
	return c.draining != "" && c.closed == "" && c.active == 0
}

// closeIfDrained closes a draining connection that has nothing in flight.
func (c *Conn) closeIfDrained() {
	c.mu.Lock()
	idle := c.drainedLocked()
	c.mu.Unlock()
	if idle {
		c.cc.Close()
	}
}

// startDraining records that the connection takes no new streams, for reason,
// and reports Draining. It reports false when it was draining or closed already.
func (c *Conn) startDraining(reason Reason) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining != "" || c.closed != "" {
		return false
	}
	c.draining = reason
	if c.ev.Draining != nil {
		c.ev.Draining(reason)
	}
	return true
}

// engineLimit records the peer's MAX_CONCURRENT_STREAMS as the engine reports
// it, once the peer's SETTINGS are known, unless the SETTINGS frames the Conn
// follows named one: those are newer than what the engine reported, or as new
// (see frameWatch).
func (c *Conn) engineLimit(peerMax int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.watched {
		c.setPeerLimitLocked(peerMax)
	}
}

// takeLimit records a MAX_CONCURRENT_STREAMS a SETTINGS frame of the peer
// named (see frameWatch): at once if raise is set, otherwise only when it is
// no higher than the limit recorded, reporting whether it did.
func (c *Conn) takeLimit(v uint32, raise bool) bool {
	peerMax := int(min(v, 1<<31-1))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watched = true
	if !raise && peerMax > c.peerMax {
		return false
	}
	c.setPeerLimitLocked(peerMax)
	return true
}

// setPeerLimitLocked records the peer's limit and reports StreamsChanged when
// the limit or Settings changed.
func (c *Conn) setPeerLimitLocked(peerMax int) {
	if c.closed != "" {
		return
	}
	c.peerMax, c.settings = peerMax, true
	c.settingsKnown.Store(true)
	s := c.snapshotLocked()
	if s.Limit == c.reported.Limit && s.Settings == c.reported.Settings {
		return
	}
	c.reported = s
	if c.ev.StreamsChanged != nil {
		c.ev.StreamsChanged(s)
	}
}
