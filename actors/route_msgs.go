package actors

import (
	"crypto/tls"
	"net"
	"net/http/httptrace"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/actors/hedge"
	"github.com/connactor/connactor/conn/h2"
	"github.com/connactor/connactor/internal/mailbox"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

// LeaseRequest is sent by the pool (Call.Lease, on the caller's goroutine) to a route
// actor: lease a connection for one request. It is answered through Ticket,
// exactly once: Deliver(Lease), or Reject(err) with ErrRouteClosed or the dial
// error of the connection meant for it. Waiters are served in arrival order. A
// caller that gives up cancels the ticket and sends LeaseCancelled; a lease the
// route delivers to a cancelled ticket stays with the route.
//
// Fresh asks for a connection that has served no request yet (the one retry
// after a stale re-used connection). Trace, when set, receives the
// ConnectStart/ConnectDone and TLSHandshakeStart/Done hooks of a dial made for
// this request (the dial runs in the connection actor, outside the caller's
// context).
type LeaseRequest struct {
	Ticket *wait.Ticket[Lease]
	Fresh  bool
	Trace  *httptrace.ClientTrace
	// Avoid names a connection not to lease a stream on (0 = none): the
	// HTTP/2 connection that just refused this request (GOAWAY,
	// REFUSED_STREAM), whose drain the route may not know of yet.
	Avoid uint64
	// Hedge, when set, asks for a hedged attempt (route_hedge.go): the
	// route serves it only with room under its limits and its hedge budget,
	// and otherwise refuses it at once (*HedgeRefused) rather than queue it.
	Hedge *HedgeAsk
}

// HedgeAsk is what a LeaseRequest for a hedged attempt says of its request:
// the attempts written so far and when the latest was (the delay counts
// from that write), and the connections they went on (the hedge goes to
// another endpoint than theirs when one is up).
type HedgeAsk struct {
	Attempts hedge.Attempts
	Conns    []uint64
}

// HedgeWon is sent by the caller to the route when a hedged attempt's
// response head came first (the request's response is the hedge's). No
// reply: the route counts it (Stats.HedgeWins).
type HedgeWon struct{}

// Undelivered answers a LeaseRequest that reached the route's mailbox after
// the route stopped.
func (m *LeaseRequest) Undelivered() { m.Ticket.Reject(ErrRouteClosed) }

// LeaseCancelled is sent by the pool to the route actor after it
// cancelled the ticket of its LeaseRequest (context ended, LeaseTimeout, Close).
// No reply. The route drops the waiter from its queue and, if the lease had
// been delivered just before the cancel (Ticket.Returned), takes the
// connection back: the one place where a lost race is undone. TimedOut says
// the caller gave up because LeaseTimeout passed (counted in the route's stats).
type LeaseCancelled struct {
	Ticket   *wait.Ticket[Lease]
	TimedOut bool
}

// Lease is a connection leased to one caller: a receipt, holding nothing of the
// route's state. The holder posts its ExchangeRequest to Inbox, the mailbox of
// Conn, and, when the exchange is over, sends a Released to the route.
type Lease struct {
	ConnID   uint64
	Conn     *actor.PID
	Inbox    *mailbox.Mailbox // Conn's (conn.Dialed.Inbox); nil for HTTP/2
	Reused   bool             // the connection served earlier requests
	IdleTime time.Duration    // how long it was idle before this lease (0 if new)
	Waited   time.Duration    // how long the request waited in the route's queue
	QueuePos int              // its position in the queue on arrival (1 = first); 0 = served at once
	Dial     DialTiming       // the connection's dial, on its first lease only
	// NetConn is the connection (httptrace's GotConnInfo.Conn), TLSState its
	// TLS state (resp.TLS; nil on plain TCP). Shared, read-only.
	NetConn  net.Conn
	TLSState *tls.ConnectionState
	// H2 is set when the lease is a stream of an HTTP/2 connection: the
	// holder calls H2.RoundTrip on its own goroutine instead of sending an
	// ExchangeRequest, and sends Released when the stream is over.
	H2 *h2.Conn
	// Offered says the caller took the HTTP/1.1 connection from the route's
	// outbox (no LeaseRequest): a lease the caller gives back untouched
	// (LeaseCancelled) counts as no lease.
	Offered bool
	// InFlight is the route's requests in flight with this one when it was
	// granted (0: the route has no adaptive limit, or the lease was taken
	// from the outbox): the holder gives it back in its Released, for the
	// limit's sample.
	InFlight int
}

// OfferDeclined is sent by a caller to the route whose outbox it took an
// offer from past the connection's due time (the route would have retired
// it by then; At is the caller's time): the connection comes back unused,
// and the route closes it. No reply. The caller then leases another way.
type OfferDeclined struct {
	ConnID uint64
	At     time.Time
}

// DialTiming says how long a connection's dial took (Took), of which TCP
// connect and TLS handshake. Zero when the lease did not get a new connection.
type DialTiming struct {
	Took, Connect, TLS time.Duration
}

// Released is sent by a lease holder to the route when its exchange is over
// (body read to EOF or closed, or the exchange failed). No reply. Reusable says
// whether the connection may serve another request; Idle caps how long it may
// stay idle (the server's Keep-Alive timeout, 0 = not announced); Stale says
// the connection turned out to be closed by the server when it was leased
// (the route learns the server's idle timeout from it); Failed says the
// connection actor failed during the exchange (conn.ErrConnActorFailed), so
// the close is recorded as an error whichever of this and the actor's
// Terminated reaches the route first. ExchangeFailed says the server
// failed the exchange, for the outlier rule: its response head was a 5xx,
// or it ended in an error after the lease that says so (exchangeFailed),
// or its response body failed on the server's side after a good head
// (bodyFailed, conn.Ender's failure); the lease holder, which saw the
// head, the error or the body's end, sets it. Each lease
// sends its own Released, never changed after it is sent.
type Released struct {
	ConnID   uint64
	Reusable bool
	Stale    bool
	Failed   bool
	Idle     time.Duration

	ExchangeFailed bool

	// Hedge says the lease was a hedged attempt (route_hedge.go: Stats.Hedges
	// counts those not Unsent, failed before anything was written; the
	// others count as the route's requests in its hedge budget).
	Hedge  bool
	Unsent bool

	latencySample
}

// FleetShareTold is sent by the supervisor to a route when the keeper has
// told its fleet share, or changed it (ShareChanged), and to a route that
// starts with one told already: Share connections on this node, of a
// fleet-wide Budget. No reply. The route counts the share in its limit in
// force (limitHeldBy); the supervisor's permits enforce it.
type FleetShareTold struct{ Share, Budget int }

// latencySample is an exchange's latency sample, for the route's adaptive
// limit and its measured hedge delay, measured by the lease holder on the
// pool's clock (the route's too) when the route has either policy (zero
// otherwise): Written is when its write began, Head when its response head
// arrived or, with TimedOut, when its caller's deadline ended it before
// the head; InFlight is Lease.InFlight. The holder keeps it apart
// (Exchange.sample) until its Released goes.
type latencySample struct {
	Written, Head time.Time
	TimedOut      bool
	InFlight      int
}

// latency is the sample's time from the write to the response head, when it
// has one (a head that came, not a timeout).
func (m *Released) latency() (time.Duration, bool) {
	if m.Written.IsZero() || m.Head.IsZero() || m.TimedOut {
		return 0, false
	}
	return m.Head.Sub(m.Written), true
}

// PermitGranted is sent by the supervisor to a route that asked for a
// connection permit (PermitRequest), when one is free: the route may open one
// more connection. An event, as every answer to an actor is (see the package
// documentation). A route that no longer needs it sends PermitReturned.
type PermitGranted struct{}

// RoomWanted is sent by the supervisor to routes holding connections when
// other routes wait for room under MaxConnsTotal or MaxConnsPerHost and no
// idle connection is left to evict, or when the route holds more than its
// fleet share (Wanted true), and again when that is over (Wanted false). No
// reply. While room is wanted, a route closes a connection that becomes free
// when none of its own waiters needs it, instead of keeping it idle; with
// Shed (above its fleet share) it closes it even when its own waiters wait,
// so that the connections it holds come down to its share. This is the only
// way a route learns of other routes' needs.
type RoomWanted struct{ Wanted, Shed bool }

// EvictIdleRequest is sent by the supervisor to the route holding the least
// recently used idle connection when another route needs room under
// MaxConnsTotal. The route closes that connection (ConnClosed follows) and
// tells the supervisor with the event IdleEvicted.
type EvictIdleRequest struct{}

// ExpiryTicked is sent by the supervisor's expiry timer to routes with idle
// connections or spare connection actors. No reply. The route closes idle
// connections idle longer than MaxIdleTime, past the server's Keep-Alive
// timeout, or older than MaxLifetime.
type ExpiryTicked struct{ Now time.Time }

// CloseIdleRequest is sent by the pool (Pool.CloseIdle) to every route
// actor, which closes all its idle connections and answers through Ticket
// (Deliver) with how many it closed; a route that has stopped answers
// Reject(ErrRouteClosed) (Undelivered).
type CloseIdleRequest struct {
	Ticket *wait.Ticket[int]
}

// Undelivered answers a CloseIdleRequest that reached the route's mailbox
// after the route stopped.
func (m *CloseIdleRequest) Undelivered() { m.Ticket.Reject(ErrRouteClosed) }

// RouteStatsRequest is sent by the pool (Pool.Stats) to a route actor, which
// answers through Ticket (Deliver) with its snapshot; a route that has
// stopped answers Reject(ErrRouteClosed) (Undelivered).
type RouteStatsRequest struct {
	Ticket *wait.Ticket[routeReport]
}

// Undelivered answers a RouteStatsRequest that reached the route's mailbox
// after the route stopped.
func (m *RouteStatsRequest) Undelivered() { m.Ticket.Reject(ErrRouteClosed) }

// routeReport answers a RouteStatsRequest: the route's snapshot, and how many
// of its spare connection actors are ready and how many being recycled (both
// counted in Stats.SpareActors).
type routeReport struct {
	route.Stats
	spare, recycling int
}
