package fleet

import (
	"context"
	"time"
)

// Renewal is one grain call's outcome, given to Config.OnRenewal.
type Renewal struct {
	Route string
	Took  time.Duration // from the call's start to its answer or abandonment
	Err   error         // nil, ErrCallTimeout (wrapped) or the cluster's error
	Grant int           // the share granted (when Err is nil)
	Safe  bool          // the grain was in safe mode (when Err is nil)
}

// Snapshot is the keeper's state at one moment (Keeper.Snapshot).
type Snapshot struct {
	Budget  int // Config.Budget
	Members int // cluster members this node sees (0 until known)
	Floor   int // the share of a route without lease whose grain cannot be reached
	Routes  []RouteShare
}

// RouteShare is one route in a Snapshot.
type RouteShare struct {
	Route     string
	Share     int           // what the node may hold now (told to the supervisor)
	OnFloor   bool          // Share is the floor: the lease expired and the grain could not be reached
	Budget    int           // the budget the grain divides (Config.Budget until it answered)
	Grant     int           // the last share the grain granted
	LeaseLeft time.Duration // until the lease expires (0: none)
	Safe      bool          // the grain's last answer came in safe mode
	Nodes     int           // nodes sharing the budget, as the grain last said
	Held      int           // as last reported
	Idle      int           // as last reported
	Waiting   int           // as last reported
	// LastRenewal is how long the last answered grain call took; Renewals and
	// Failures count answered and failed (or timed-out) calls.
	LastRenewal        time.Duration
	Renewals, Failures int
}

// Internal messages of the keeper actor.

// tick is sent by the keeper's ticker goroutine to the keeper every tick
// interval. No reply.
type tick struct{}

// callEnded is sent by a call goroutine to the keeper when its grain call
// returned. No reply.
type callEnded struct {
	route string
	seq   uint64
	resp  shareResponse
	err   error
}

// membersSeen is sent to the keeper by its topology subscription and, with
// first set, by New with the count it read at start (which loses to any
// topology event: it may have been read before the event's change). No reply.
type membersSeen struct {
	n     int
	first bool
}

// snapshotRequest is sent by Keeper.Snapshot; answered on reply (cap 1).
type snapshotRequest struct{ reply chan Snapshot }

// releaseRequest is sent by Keeper.Stop: the keeper gives every share back to
// the grains (calls in the background), stops telling the supervisor, and
// closes done once the calls have started. ctx is Stop's: a release reached
// after it ended is skipped.
type releaseRequest struct {
	done chan struct{}
	ctx  context.Context
}
