package actors

import "errors"

// ErrRouteClosed rejects leases on a route actor that is stopping with its
// client.
var ErrRouteClosed = errors.New("actors: route closed")

// ErrRouteFailed is what a wait on a route actor learns when the route actor
// stopped without answering (it panicked, or the supervisor failed and took
// its routes down): the route's Done channel closed first. Nothing was sent.
var ErrRouteFailed = errors.New("actors: route actor failed")

// ErrClosing rejects RouteRequests once the client is closing: the supervisor
// starts no new route.
var ErrClosing = errors.New("actors: supervisor closing")

// ErrSupervisorFailed is what a RouteRequest learns when the supervisor failed
// before answering it (its Incarnation ended). Nothing was sent; the next
// request reaches the restarted supervisor.
var ErrSupervisorFailed = errors.New("actors: supervisor failed")

// ErrQueueFull rejects a LeaseRequest when MaxPendingPerRoute callers already
// wait on the route. Nothing was sent.
var ErrQueueFull = errors.New("actors: route's wait queue is full")

// ErrRouteUnavailable rejects a LeaseRequest while the route fails fast: its
// dials kept failing, and its cool-down has not passed. Nothing was sent.
var ErrRouteUnavailable = errors.New("actors: route unavailable: dials keep failing")
