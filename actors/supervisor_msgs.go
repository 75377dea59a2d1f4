package actors

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/internal/mailbox"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
	"github.com/connactor/connactor/telemetry"
)

// RouteRequest is posted by the pool to the supervisor's mailbox to find (or
// start) the route actor of Key. It is answered through Ticket: Deliver(the
// route's handle); Reject(ErrClosing) once the client is closing, also by the
// supervisor's closed mailbox (Undelivered); Reject(ErrSupervisorFailed) when
// the supervisor failed while handling it. The supervisor's mailbox survives
// its restarts: requests that wait there are answered by the restarted
// instance. The pool caches handles until their Done channel closes, so the
// supervisor sees one RouteRequest per route, not one per request.
type RouteRequest struct {
	Key    route.Key
	Ticket *wait.Ticket[*routeHandle]
}

// Undelivered answers a RouteRequest that reached the supervisor's mailbox
// after the supervisor stopped.
func (m *RouteRequest) Undelivered() { m.Ticket.Reject(ErrClosing) }

// routeHandle is what the pool keeps of a route actor. Callers post their
// messages to its mailbox (post), which the supervisor made and which
// outlives the route actor: once the actor has stopped, the mailbox answers
// what it can no longer deliver (a LeaseRequest with ErrRouteClosed), so a
// caller waits for its ticket and nothing else. Done is closed by the
// supervisor when the route actor has stopped, whatever the reason (client
// closed, panic, supervisor failure): the pool polls it (never waits on it)
// to stop using the handle.
type routeHandle struct {
	Key   route.Key
	PID   *actor.PID
	Pub   *routePublished
	Fleet *fleetPublished
	Done  <-chan struct{}
	mb    *mailbox.Mailbox
	// outbox is the route's outbox (Route.outbox): callers take offers from
	// it (take); only the route sends.
	outbox <-chan offer
	tel    *telemetry.Route // the route's telemetry (nil = none): callers record their lease's wait
}

// post sends msg to the route actor through its mailbox.
func (h *routeHandle) post(msg any) { h.mb.PostUserMessage(msg) }

// routeParts are what the supervisor makes for a route actor before spawning
// it, and hands to it: the counters it publishes, its mailbox, which
// outlives it (the actor closes it when it stops), its outbox, and
// MaxConnsPerHost, a limit the supervisor enforces that the route counts
// in its own (limitHeldBy; its fleet share comes as FleetShareTold).
type routeParts struct {
	pub     *routePublished
	mb      *mailbox.Mailbox
	outbox  chan offer
	tel     *telemetry.Route
	hostCap int // MaxConnsPerHost (0: none)
}

// fleetPublished is a route's fleet budget as the supervisor enforces it
// (SupervisorConfig.Fleet). The supervisor is the single writer of every
// field, when the keeper's ShareChanged arrives; Stats and the
// connactor.fleet.share gauge read them (the route itself is told by
// message: FleetShareTold). Both stay 0 without a fleet budget.
type fleetPublished struct {
	Share  atomic.Int32 // this node's share: the most connections the route may hold
	Budget atomic.Int32 // the fleet-wide budget the share is part of (0 until the first share)
}

// PermitRequest is sent by a route actor to the supervisor: it needs one more
// connection. The supervisor grants it with the event PermitGranted (sent to
// From) when MaxConnsTotal allows, at once or after an eviction or a close
// elsewhere, in FIFO order.
type PermitRequest struct{ From *actor.PID }

// PermitReturned is sent by a route actor that received a PermitGranted it no
// longer needs (its waiter left). No reply.
type PermitReturned struct{ From *actor.PID }

// PermitWithdrawRequest is sent by a route actor to the supervisor when it
// has asked for more permits than its waiters need (they gave up while it
// waited): left queued, they would count as demand (a fleet keeper would keep
// asking for a share for them) and be granted only to be returned. The
// supervisor takes up to N of the route's permits out of its queue, the newest
// first, and answers PermitWithdrawResponse; the permits it had granted
// already reach the route as PermitResponse before that answer.
type PermitWithdrawRequest struct {
	From *actor.PID
	N    int
}

// PermitWithdrawResponse answers a PermitWithdrawRequest: Asked is its N, and
// Taken how many permits left the queue (the route no longer waits for them).
type PermitWithdrawResponse struct{ Asked, Taken int }

// ConnClosed is sent by a route actor to the supervisor when one of its
// connections (or a dial) ended, after its socket was closed. No reply. It frees
// one place under MaxConnsTotal.
type ConnClosed struct {
	From   *actor.PID
	Reason route.CloseReason
}

// IdleEvicted is sent by a route actor to the supervisor once it handled an
// EvictIdleRequest: whether it closed an idle connection (if it did, its
// ConnClosed was sent first). No reply.
type IdleEvicted struct {
	From    *actor.PID
	Evicted bool
}

// RouteReclaimed is sent by a route actor to the supervisor when it has
// reclaimed itself, unused for MaxIdleTime (route_reclaim.go): it refuses
// every lease from then on. No reply. The supervisor starts the next
// RouteRequest for its key as a new route and stops it.
type RouteReclaimed struct{ From *actor.PID }

// LongWaitNoticed is sent by a route actor to the supervisor when its oldest
// caller has waited LongWait for a connection permit the supervisor holds
// back (at most once per LongWaitEvery). No reply. The supervisor logs the
// long-wait warning, naming what holds the permit back: MaxConnsTotal,
// MaxConnsPerHost or the route's fleet share, which the route cannot tell.
type LongWaitNoticed struct {
	From    *actor.PID
	Route   string // the route's name
	Waiting int    // callers waiting
	Oldest  time.Duration
	Leased  int // connections leased
}

// StatsRequest is posted by the pool (Pool.Stats, Pool.CloseIdle) to the
// supervisor's mailbox; the supervisor answers through Ticket (Deliver) with
// its counts and routes, or Reject(ErrClosing) once stopped (Undelivered),
// or Reject(ErrSupervisorFailed) when it failed while handling it. The pool
// then asks each route itself, so that the supervisor never waits for its
// routes.
type StatsRequest struct {
	Ticket *wait.Ticket[StatsResponse]
}

// Undelivered answers a StatsRequest that reached the supervisor's mailbox
// after the supervisor stopped.
func (m *StatsRequest) Undelivered() { m.Ticket.Reject(ErrClosing) }

// StatsResponse is the supervisor's answer to a StatsRequest.
type StatsResponse struct {
	Routes                 []*routeHandle
	Total, MaxTotal        int // connections open or being dialed, and the limit
	PermitWaiters          int
	Evictions, Expired     uint64
	DialFailures, Restarts uint64 // Restarts: route actors that stopped on a failure
	Reclaimed              uint64 // route actors that reclaimed themselves unused
}
