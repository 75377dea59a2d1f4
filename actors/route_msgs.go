package actors

import (
	"net/http/httptrace"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// LeaseRequest is sent by a caller (the client front door, on the caller's
// goroutine) to a route actor to lease a connection. It is answered exactly once
// on Reply (cap 1): a grant, a rejection, or, after a LeaseCancel that found the
// request still queued, the cancellation's error. Waiters are served in arrival
// order. Fresh asks for a connection that has served no request yet (the one
// retry after a stale re-used connection). Trace, when set, receives the
// ConnectStart/ConnectDone and TLSHandshakeStart/Done hooks of a dial made for
// this request (the dial runs in the connection actor, outside the caller's
// context).
type LeaseRequest struct {
	ID    uint64
	Fresh bool
	Reply chan LeaseResponse
	Trace *httptrace.ClientTrace
}

// LeaseResponse answers a LeaseRequest: a Lease, or an error (ErrRouteClosed,
// the cancellation's error, or the dial error of the connection meant for it).
type LeaseResponse struct {
	Lease Lease
	Err   error
}

// Lease is a connection leased to one caller. The holder sends its exchange to
// Conn and, when the exchange is over, a Release to the route. It holds no state
// of the route's: it is a receipt.
type Lease struct {
	ConnID   uint64
	Conn     *actor.PID
	Reused   bool          // the connection served earlier requests
	IdleTime time.Duration // how long it was idle before this lease (0 if new)
	Waited   time.Duration // how long the request waited in the route's queue
	QueuePos int           // its position in the queue on arrival (1 = first); 0 = served at once
	Dial     DialTiming    // the connection's dial, on its first lease only
	// Release is the message that ends this lease: the holder fills in
	// Reusable and Idle and sends it to the route. There is one per
	// connection, re-used by each of its leases: the route has processed a
	// connection's Release before it can lease the connection again, so the
	// message is never changed while in flight.
	Release *Release
}

// DialTiming says how long a connection's dial took (Took), of which TCP
// connect and TLS handshake. Zero when the lease did not get a new connection.
type DialTiming struct {
	Took, Connect, TLS time.Duration
}

// LeaseCancel is sent by a caller whose context ended (or whose LeaseTimeout
// passed) while its LeaseRequest was queued. If the request is still queued the
// route removes it and answers it on its Reply with Err; if a grant already
// crossed the cancel, nothing more is sent and the caller must Release the lease.
type LeaseCancel struct {
	ID  uint64
	Err error
}

// Release is sent by a lease holder when its exchange is over (body read to EOF
// or closed, or the exchange failed). No reply. Reusable says whether the
// connection may serve another request; Idle caps how long it may stay idle
// (the server's Keep-Alive timeout, 0 = not announced).
type Release struct {
	ConnID   uint64
	Reusable bool
	Idle     time.Duration
}

// PermitGranted is sent by the supervisor to a route that asked for a connection
// permit (PermitRequest): the route may open one more connection. No reply; a
// route that no longer needs it sends PermitReturned.
type PermitGranted struct{}

// EvictIdleRequest is sent by the supervisor to the route holding the least
// recently used idle connection when another route needs room under
// MaxConnsTotal. The route closes that connection (ConnClosed follows) and answers
// EvictIdleResponse.
type EvictIdleRequest struct{}

// ExpireIdle is sent by the supervisor's expiry timer to routes with idle
// connections: the route closes those idle longer than MaxIdleTime, past the
// server's Keep-Alive timeout, or older than MaxLifetime. No reply.
type ExpireIdle struct{ Now time.Time }

// RouteStatsRequest asks a route actor for a snapshot of its counts; it is
// answered on Reply (which must have room).
type RouteStatsRequest struct {
	Reply chan RouteStats
}

// RouteStats is one route's snapshot.
type RouteStats struct {
	Route                       string
	Open, Leased, Idle, Pending int
	Dialing                     int
	Max                         int
	Opened, Closed              uint64 // connections opened and closed since the route started
	Leases, Reuses              uint64 // leases granted, and of those on a re-used connection
	ClosedBy                    map[string]uint64
	RecentCloses                []ClosedConn  // newest first, at most 16
	RecentWaits                 []Wait        // leases that queued, newest first, at most 16
	OldestLease                 time.Duration // age of the oldest lease not yet released; 0 = none
}
