// Package h2 is one HTTP/2 client connection over a socket connactor dialled
// itself, with the stream accounting and the events a route actor needs to
// lease streams on it. It starts no actors: the connection actor owns one Conn
// and turns its events into messages to its route.
//
// # The engine
//
// Framing, HPACK, flow control, GOAWAY and PING are golang.org/x/net/http2's:
// a per-connection http2.Transport whose NewClientConn takes the net.Conn from
// conn's dial path (TLS with ALPN "h2", or plain TCP for h2c with prior
// knowledge). Go 1.26's net/http.ClientConn was weighed against it and lost on
// four counts, each checked in the source (GOROOT net/http/clientconn.go and
// h2_bundle.go; x/net v0.62.0 http2/transport.go):
//
//   - It dials by itself. A pre-dialled socket gets in only through a throwaway
//     Transport whose DialTLSContext returns it, and that path requires a
//     concrete *tls.Conn, so the socket cannot be wrapped to see its read
//     errors and its close (this package does, to tell why a connection ended).
//   - Its Err reports "connection closed" whatever happened, and its state hook
//     runs only when Available grows, InFlight shrinks or Err appears: a GOAWAY
//     (Available drops to 0 for good) is indistinguishable from a full
//     connection, and the bundled HTTP/2 client never calls
//     HTTP2Config.CountError, so a lost PING cannot be told from a server close.
//   - It cannot tell "100 assumed" from "the peer said 100": x/net's State
//     reports MaxConcurrentStreams 0 until the peer's SETTINGS arrive.
//   - x/net also has Ping (used once per connection to learn when SETTINGS have
//     arrived: RFC 9113 section 3.4 puts them before any PING ack), SetDoNotReuse
//     (retire without blocking), ClientConnPool.MarkDead (called by the read loop
//     when a GOAWAY arrives) and Transport.CountError per connection
//     ("conn_close_lost_ping").
//
// The price: x/net's client is a second copy of the code net/http bundles, and
// from Go 1.27 x/net/http2.ClientConn becomes a deprecated wrapper around
// net/http.ClientConn (x/net's transport_wrap.go, unless built with the
// http2legacy tag), where MarkDead fires only on close and State no longer
// reports the missing SETTINGS. The tests of this package pin the behaviour
// relied on, so that move will show; engine.go holds every x/net-specific
// call and error.
//
// # Streams
//
// A Conn's limit is min(the peer's SETTINGS_MAX_CONCURRENT_STREAMS, the local
// cap HTTP2Config.MaxConcurrentStreams), with 100 assumed until the peer's
// SETTINGS arrive (golang/go#39389). The peer may change its limit at any
// time: the Conn follows every SETTINGS frame the engine reads (settings.go),
// so a lowered limit turns new streams away at once, as not sent, and a
// raised one is offered once the engine has it. Available is the limit minus
// the streams in flight. The Conn keeps no reservations: its owner (a route
// actor) counts the streams it leases against Limit, and RoundTrip takes a
// free stream or fails with ErrNoStream.
//
// # Events
//
// Events are callbacks, called one at a time and in order, while the Conn holds
// its lock: they must not block and must not call the Conn. StreamsChanged
// reports a changed limit (the peer's SETTINGS), Draining that the connection
// takes no new streams (a GOAWAY, or two refused streams), Closed that it
// is gone, with a reason. Stream starts and ends are not events: the owner sees
// them (RoundTrip, Done).
//
// # Use by the actors
//
// The connection actor dials (offering "h2" by ALPN), calls New, forwards the
// events to its route as messages, and closes the socket under the Conn when it
// stops or its route aborts it (never waiting for a TLS alert): the engine's
// read loop then fails its read and ends, the probe with it, and Closed follows.
// It never waits on a stream. A route actor leases streams: it counts its grants per connection
// against Streams.Limit, and the holder of a grant calls RoundTrip on its own
// goroutine (Conn is safe for concurrent use; a mailbox would serialize
// streams), then releases the grant from done, as for HTTP/1.1.
//
// # Errors
//
// A stream refused before the server processed it (above a GOAWAY's last stream
// id, or reset with REFUSED_STREAM) fails with ErrRefused, and a stream the
// connection had no room for with ErrNoStream; both satisfy
// errors.Is(err, conn.ErrNotSent): replay them on another connection, whatever
// the method. Other failures satisfy errors.Is(err, conn.ErrOutcomeUnknown).
// A connection that refuses two streams sent within its announced limit retires
// itself (OkHttp's rule).
package h2
