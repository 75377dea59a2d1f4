package conn

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn/h2"
	"github.com/connactor/connactor/internal/mailbox"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

// Dialed is sent by a connection actor to its parent (the route actor) once its
// dial finished: Err is nil when the connection is ready for an exchange. No reply.
// The owner aborts the connection with CloseNow(NetConn).
type Dialed struct {
	ID  uint64
	Err error
	// Took is how long the dial (TCP, proxy tunnel and TLS) took; Connect and
	// TLS are its TCP connect and TLS handshake parts (for telemetry).
	Took, Connect, TLS time.Duration
	// NetConn is the connection (httptrace's GotConnInfo.Conn, its peer's
	// address), TLSState its TLS state (nil on plain TCP; every response's
	// resp.TLS). Read-only for everyone but the connection actor.
	NetConn  net.Conn
	TLSState *tls.ConnectionState
	// H2 is set when the connection speaks HTTP/2: the route leases its
	// streams, up to the limit H2.Streams reports.
	H2 *h2.Conn
	// Peer is the address the TCP connection went to (the target's, or the
	// proxy's): the endpoint of DialRequest.To that connected, or the
	// socket's remote address on a dial by name (zero when it is not a TCP
	// address, or nothing connected; set when a later step, TLS or a
	// proxy's answer, failed). Failed names the endpoints of To whose TCP
	// connect failed (refused, unreachable, timed out), success or not: a
	// TLS or proxy failure after the connect is none of theirs.
	Peer   netip.AddrPort
	Failed Endpoints
	// Inbox is the actor's mailbox (HTTP/1.1 only), for lease holders: an
	// ExchangeRequest posted there reaches the actor as one sent to its PID
	// does, and one that reaches it after it stopped is answered by the
	// mailbox (ErrConnActorFailed) instead of being dropped, so that the
	// holder's wait needs nothing but its ticket.
	Inbox *mailbox.Mailbox
}

// StreamsChanged is sent by an HTTP/2 connection actor to its route when the
// connection's stream limit changed (the server's SETTINGS). No reply. The
// route reads the new limit from the connection (h2.Conn.Streams), which may
// be newer than any message.
type StreamsChanged struct {
	ID uint64
}

// DrainStarted is sent by an HTTP/2 connection actor to its route when the
// connection takes no new streams (GOAWAY, refused streams, or a drain the
// route asked for); it closes when its last stream ends. No reply.
type DrainStarted struct {
	ID     uint64
	Reason route.CloseReason
}

// H2Closed is sent by an HTTP/2 connection actor to its route when the
// connection closed, and why (route.ReasonGoAway, ReasonPingTimeout,
// ReasonServerClosed, ReasonError, ...). No reply. It is the connection's last event.
type H2Closed struct {
	ID     uint64
	Reason route.CloseReason
	Err    error
}

// IdleBroken is sent to the parent route actor by a connection's idle watcher when
// the server closed the idle connection or sent bytes nobody asked for
// (the idea of Lwan's EPOLLRDHUP watch). No reply. The route discards
// the connection if it is still idle; if it was leased meanwhile, the lease holder
// finds out when its exchange starts.
type IdleBroken struct {
	ID  uint64
	Err error
}

// WatchIdle is sent by the route actor to a connection that has just become idle:
// the connection starts watching its socket. No reply.
type WatchIdle struct{}

// ExchangeRequest is sent by the holder of a lease to the connection actor
// (posted to Dialed.Inbox): write Req and read the response head. It is
// answered exactly once, through Reply (the holder's ticket): by the actor,
// by the actor's Stopping when it fails while handling it, or by its closed
// mailbox when it reaches an actor that has stopped (Undelivered). The
// connection actor has an inline-first mailbox, so the exchange runs on the
// sender's goroutine and the answer is usually in Reply when Send returns. A
// holder that cancels Reply has the answer dropped: a response body is not
// read and its Done never called (the connection is closed), while a
// response without a body has ended its exchange, Done included, before it
// is answered.
//
// On success the response body streams from the socket; Done is called exactly
// once when the exchange is over (body at EOF, closed, or failed while read),
// with whether the connection may be re-used and the server's idle timeout
// (0 when not announced). Done must not block. On an error answer Done is not
// called: the exchange is over and the connection broken; the holder releases it.
//
// AcceptGzip asks for "Accept-Encoding: gzip" on the wire (transparent
// compression) without a copy of Req's header: the request is written as if
// its header had that field.
//
// ConnID is the leased connection's ID (Lease.ConnID). A connection actor
// serves several sockets in turn (it is recycled when one closes), so an
// exchange meant for another of its connections is refused with ErrStaleConn,
// nothing written: a request goes only to the socket it was leased.
type ExchangeRequest struct {
	ConnID     uint64
	Req        *http.Request
	Reused     bool
	AcceptGzip bool
	Reply      *wait.Ticket[ExchangeResponse]
	Done       Ender
}

// Undelivered answers an exchange that reached the connection actor after it
// stopped (its mailbox is closed): nothing was written.
func (m *ExchangeRequest) Undelivered() {
	m.Reply.Deliver(ExchangeResponse{Err: &ExchangeError{Op: "write", Reused: m.Reused, Err: ErrConnActorFailed}})
}

// Ender is told when an exchange is over (see ExchangeRequest.Done). The lease
// holder implements it on the value that holds its exchange, so that the
// request costs no closure.
//
// failure is the error that ended the response body when the server's side
// failed it after a good head: the connection reset or closed, the body cut
// short, a read that timed out. It is nil when the body was read to its
// end or closed by its holder, and when the request's context or the
// request's own body ended the exchange: those say nothing of the server.
type Ender interface {
	ExchangeEnded(reusable bool, idle time.Duration, failure error)
}

// ExchangeResponse answers an ExchangeRequest: a response with a streaming body,
// or an error (an *ExchangeError, a *RequestBodyError when the request's body
// failed, or the request context's error).
//
// The request's body is written while the response is read (full duplex, as
// net/http does). Early is non-nil (an *EarlyResponseError, errors.Is
// ErrEarlyResponse) when Resp arrived before the body was sent in full and the
// rest will not be sent: the server answered and closed (401 or 413 before an
// upload), or answered with a final status of 300 or more, after which the
// client stops sending (as curl does). Resp is the server's answer all the
// same, and the connection is not re-used after it. Early is nil when the body
// was sent, and when a response below 300 streams while the body is still
// being written (a stream echoed back, a CONNECT tunnel).
//
// A 101 Switching Protocols response's Body is an io.ReadWriteCloser over the
// connection (as net/http's): the connection leaves HTTP, is never re-used, is
// no longer bounded by the request's context, and Done(false, 0) is called when
// that Body is closed.
type ExchangeResponse struct {
	Resp  *http.Response
	Err   error
	Early error
}

// dialResult is a dial: the job a connection actor hands to a dial worker
// (startDial; the worker reads only the job's fields), then the result the
// worker sends back to that actor, then, in the same allocation, the Dialed
// the actor sends to its route. The socket itself is handed over through
// Actor.dialed (which points at nc).
type dialResult struct {
	// The job: set by startDial, never changed afterwards.
	c      *Actor // for its dialed and stopped atomics only
	sys    *actor.ActorSystem
	self   *actor.PID
	key    route.Key
	addr   string
	opt    *Options
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
	// foreign: started by a caller in a bubble the client is not in; ctx
	// has no deadline yet, and start is read by the worker (run).
	foreign bool

	// The result: written by the worker, then read by the actor; but
	// dialLog.to, the endpoints to dial, which startDial sets with the job.
	err  error
	took time.Duration
	dialLog
	nc net.Conn

	// The report to the route (report fills it): the route reads it and keeps
	// none of it but its fields' values.
	dialed Dialed
}

// report fills and returns the Dialed of the connection numbered id: the
// dial's outcome and times and, when it succeeded, its socket nc and that
// socket's TLS state.
func (m *dialResult) report(id uint64, err error, nc net.Conn) *Dialed {
	m.dialed = Dialed{ID: id, Err: err, Took: m.took, Peer: m.peer, Failed: m.failed}
	if err == nil {
		m.dialed.Connect, m.dialed.TLS = m.connect, m.tls
		m.dialed.NetConn, m.dialed.TLSState = nc, tlsState(nc)
	}
	return &m.dialed
}

// RecycleRequest is sent by the route actor to a connection actor whose
// connection it has closed (its socket aborted, its ID forgotten), instead of
// stopping it: the actor drops everything of that socket and tells its parent
// with the event Recycled, ready for a DialRequest, the cheap way to a
// new connection of the same route (no spawn, no stop). An actor that cannot
// be re-used safely (its buffers still lent to a response body or a request
// writer, an HTTP/2 connection, a dial in flight) stops itself instead: the
// parent sees its Terminated and no Recycled.
type RecycleRequest struct{}

// Recycled is sent by a connection actor to its parent once it handled a
// RecycleRequest: PID, the actor, holds no socket and waits for a
// DialRequest. No reply. Nothing of its previous socket
// reaches the parent afterwards but events carrying that socket's ID (a late
// IdleBroken), which the parent no longer knows.
type Recycled struct{ PID *actor.PID }

// DialRequest is sent by the route actor to a recycled connection actor (see
// RecycleRequest): dial a new socket, numbered ID (unique within the route,
// never that of an earlier socket), bounded by Life, to To (the zero
// Endpoints: by name), as DialProps' request. Answered with Dialed, as for a
// new actor.
type DialRequest struct {
	ID   uint64
	Life context.Context
	To   Endpoints
}
