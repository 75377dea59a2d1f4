package fleet

import (
	"context"
	"time"

	"github.com/connactor/connactor/fleet/internal/protocol"
)

// coordinator is the fleet's source of truth, as one member uses it: the
// member's session, the registry of hosts and nodes, and the owners of the
// shards. etcdCoordinator keeps them in etcd; the tests of this package use
// an in-memory one. Its methods are safe for concurrent use; the blocking
// ones end with their context.
type coordinator interface {
	// Open starts the member's session, registers its host, and starts
	// watching the registry. It keeps the session alive until Close, and
	// tells events of every registry version, every confirmation of the
	// session and a lost session (after which it opens a new one,
	// registering again the host and every node). It does not block: a
	// coordinator that cannot be reached is tried again in the background.
	Open(host protocol.HostID, events coordEvents)
	// Register adds node to the registry under the session, and keeps it
	// there (also across a new session) until Deregister. It does not
	// block: a coordinator that cannot be reached is tried again in the
	// background, and a Deregister that comes first is not undone.
	Register(node protocol.NodeID)
	Deregister(ctx context.Context, node protocol.NodeID) error
	// Acquire takes shard for this member's host if it has no owner.
	Acquire(ctx context.Context, shard int) (acquired, error)
	// Transfer moves shards, owned by this host at epochs, to host to (bound
	// to its session), all or none, each at its epoch + 1.
	Transfer(ctx context.Context, shards []int, epochs []uint64, to protocol.HostInfo) (transferred, error)
	// Leave marks the host as leaving in the registry: no shard is placed
	// on it from then on, and the others take what it hands them.
	Leave(ctx context.Context) error
	// Close ends the session: the host's registration goes at once, the
	// shards it still owns only after hold (they stay bound to a tombstone
	// for as long as the host's last grants may run, so that nobody takes
	// them over and grants the same budget again meanwhile).
	Close(ctx context.Context, hold time.Duration) error
}

// coordEvents receives what a coordinator learns. Each call must return at
// once.
type coordEvents interface {
	Registry(reg *protocol.Registry)
	// Confirmed says that the session lives at least until until.
	Confirmed(session int64, until time.Time)
	// SessionLost says that the session expired: every key bound to it is
	// gone. A new session follows.
	SessionLost()
}

// acquired is the outcome of Acquire.
type acquired struct {
	ok    bool            // the host owns the shard
	epoch uint64          // the shard's epoch (the owner's, when not ok)
	prev  bool            // it had an owner before: safe mode
	from  protocol.HostID // ok: the shard came by a transfer from this host, whose handoff may still come
	owner protocol.HostID // !ok: the owner
	// session is the session the shard is bound to (ok): the host's may
	// have changed while the call ran.
	session int64
}

// transferred is the outcome of Transfer.
type transferred struct {
	ok     bool
	epochs []uint64 // ok: the shards' new epochs
	lost   bool     // !ok: the host does not own (all of) the shards any more
}
