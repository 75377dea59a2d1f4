package actors

import (
	"errors"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/internal/errs"
)

// The errors a Pool's caller sees. The client re-exports them under the same
// names, with the contract of each (client's errors.go): the values are the
// same, so errors.Is holds whichever package a caller names.

// ErrClosed answers every call on a pool that is closed or closing, and the
// waits that were in progress when it closed. It is returned unwrapped.
var ErrClosed = errors.New("connactor: client closed")

// ErrLeaseTimeout is returned (wrapped, with ErrNotSent) when a wait for
// admission, a route or a connection outlasted PoolConfig.LeaseTimeout. It is
// a net.Error whose Timeout() is true, as is every error that wraps it.
var ErrLeaseTimeout = errs.Timeout("connactor: timed out waiting for a pooled connection", "lease_timeout")

// ErrQueueFull rejects a lease when MaxPendingPerRoute callers already wait on
// the route. It is ErrNotSent.
var ErrQueueFull error = &policyError{msg: "connactor: route's wait queue is full", kind: "queue_full"}

// ErrRouteUnavailable rejects a lease while the route fails fast: its dials
// kept failing, and its cool-down has not passed. It is ErrNotSent; the last
// dial's error stays reachable with errors.As.
var ErrRouteUnavailable error = &policyError{msg: "connactor: route unavailable: its dials keep failing", kind: "route_unavailable"}

// ErrOverloaded rejects a caller that waited in its route's queue while the
// queue stood longer than QueueTarget (the route sheds as CoDel does). It is
// ErrNotSent: nothing of the request reached the server.
var ErrOverloaded error = &policyError{msg: "connactor: route overloaded: its callers keep waiting longer than QueueTarget", kind: "overloaded"}

// ErrInvalidRequest is returned (with ErrNotSent) for requests refused before
// anything is written: nil request or URL, invalid method or Host, header
// names or values with CR, LF or other invalid bytes. The message is
// net/http's, which libraries match.
var ErrInvalidRequest = errors.New("connactor: invalid request")

// Errors of the connections, as conn defines them: see there.
var (
	ErrNotSent                = conn.ErrNotSent
	ErrOutcomeUnknown         = conn.ErrOutcomeUnknown
	ErrStaleConn              = conn.ErrStaleConn
	ErrResponseHeaderTooLarge = conn.ErrResponseHeaderTooLarge
	ErrResponseHeaderTimeout  = conn.ErrResponseHeaderTimeout
	ErrEarlyResponse          = conn.ErrEarlyResponse
	ErrConnActorFailed        = conn.ErrConnActorFailed
)

// ExchangeError is conn's: a failed exchange on a connection, dials included.
type ExchangeError = conn.ExchangeError

// ProxyConnectError is conn's: a proxy refused a CONNECT tunnel.
type ProxyConnectError = conn.ProxyConnectError

// ErrRouteClosed rejects leases on a route actor that is stopping with its
// client.
var ErrRouteClosed = errors.New("actors: route closed")

// ErrRouteFailed is what a lease learns when the route actor stopped before
// serving it (it panicked, or the supervisor failed and took its routes
// down), and the pool is not closing. Nothing was sent.
var ErrRouteFailed = errors.New("actors: route actor failed")

// ErrClosing rejects RouteRequests once the client is closing: the supervisor
// starts no new route.
var ErrClosing = errors.New("actors: supervisor closing")

// ErrSupervisorFailed is what a RouteRequest learns when the supervisor failed
// while handling it. Nothing was sent; the next request reaches the
// restarted supervisor.
var ErrSupervisorFailed = errors.New("actors: supervisor failed")

// notSentError marks err as a failure before anything was sent. It keeps err's
// message and chain: errors.Is finds both err's sentinels and ErrNotSent.
type notSentError struct{ err error }

// NotSent marks err as a failure before anything was written: errors.Is finds
// ErrNotSent as well as err's own chain, and Timeout reports err's.
func NotSent(err error) error { return &notSentError{err} }

func (e *notSentError) Error() string   { return e.err.Error() }
func (e *notSentError) Unwrap() []error { return []error{e.err, ErrNotSent} }

// Timeout reports whether the cause is a timeout (ErrLeaseTimeout, a
// deadline), so that http.Client's *url.Error says Timeout() and
// os.IsTimeout holds, as for net/http's own timeouts.
func (e *notSentError) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.err, &t) && t.Timeout()
}

// policyError is a request refused by a pool policy, before anything was sent.
type policyError struct{ msg, kind string }

func (e *policyError) Error() string        { return e.msg }
func (e *policyError) Is(target error) bool { return target == ErrNotSent }
func (e *policyError) ErrorType() string    { return e.kind }

// wrapped is err, with cause reachable too (errors.Is and errors.As see both).
type wrapped struct{ err, cause error }

func (w *wrapped) Error() string   { return w.err.Error() }
func (w *wrapped) Unwrap() []error { return []error{w.err, w.cause} }
