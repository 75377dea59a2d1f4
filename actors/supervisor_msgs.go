package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/route"
)

// RouteRequest is sent by the client front door to the supervisor to find (or
// start) the route actor of Key. It is answered on Reply (cap 1). The front door
// caches the answer, so the supervisor sees one RouteRequest per route, not per
// request.
type RouteRequest struct {
	Key   route.Key
	Reply chan RouteResponse
}

// RouteResponse answers a RouteRequest. Err is ErrRouteClosed when the client is
// closing.
type RouteResponse struct {
	Route *RouteHandle
	Err   error
}

// RouteHandle is what the front door keeps of a route: its PID and the counters
// the route publishes. It is read-only but for the published atomics.
type RouteHandle struct {
	Key route.Key
	PID *actor.PID
	Pub *RoutePublished
}

// PermitRequest is sent by a route actor to the supervisor: it needs one more
// connection. Answered with PermitGranted (sent to From) when the total limit
// allows, at once or after an eviction or a close elsewhere, in FIFO order.
type PermitRequest struct{ From *actor.PID }

// PermitReturned is sent by a route actor that received a PermitGranted it no
// longer needs (its waiter left). No reply.
type PermitReturned struct{ From *actor.PID }

// ConnClosed is sent by a route actor to the supervisor when one of its
// connections (or a dial) ended, after its socket was closed. No reply. It frees
// one place under MaxConnsTotal.
type ConnClosed struct {
	From   *actor.PID
	Reason CloseReason
}

// EvictIdleResponse answers an EvictIdleRequest: whether the route closed an
// idle connection (if it did, its ConnClosed was sent first).
type EvictIdleResponse struct {
	From    *actor.PID
	Evicted bool
}

// AdmitRequest is sent by the front door when MaxConcurrentRequests is reached
// (the fast path is an atomic in SupervisorPublished). Answered exactly once on
// Reply: nil when admitted, or the LeaseCancel-style cancellation error.
type AdmitRequest struct {
	ID    uint64
	Reply chan error
}

// AdmitCancel is sent by a caller that gave up waiting for admission. If still
// queued, its AdmitRequest is answered with Err; otherwise the caller was admitted
// and must give the admission back.
type AdmitCancel struct {
	ID  uint64
	Err error
}

// AdmitWake is sent by the front door when it ended a request while callers were
// queued for admission. No reply.
type AdmitWake struct{}

// StatsRequest asks the supervisor for its routes and global counts; answered on
// Reply (cap 1). The front door then asks each route for its RouteStats itself,
// so that the supervisor never waits for its routes.
type StatsRequest struct {
	Reply chan StatsResponse
}

// StatsResponse answers a StatsRequest.
type StatsResponse struct {
	Routes                           []*RouteHandle
	Total, MaxTotal                  int
	PermitWaiters, AdmitWaiters      int
	Evictions, Expired, DialFailures uint64
	RoutesStarted                    int
}

// CloseReason says why a connection was closed.
type CloseReason string

// Reasons a connection closes.
const (
	ReasonIdleExpired  CloseReason = "idle_expiry"
	ReasonLifetime     CloseReason = "lifetime"
	ReasonKeepAlive    CloseReason = "keepalive_timeout"
	ReasonEvicted      CloseReason = "lru_eviction"
	ReasonServerClosed CloseReason = "server_close"
	ReasonNotReusable  CloseReason = "not_reusable"
	ReasonError        CloseReason = "error"
	ReasonDialFailed   CloseReason = "dial_error"
	ReasonClientClosed CloseReason = "client_close"
	ReasonUnusedPermit CloseReason = "unused_permit"
)
