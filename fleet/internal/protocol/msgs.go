package protocol

import "time"

// The messages between nodes and hosts. They are plain values: the fleet's
// actors carry them across the cluster as the protobuf messages of the same
// names in fleetpb/fleet.proto (codec.go converts), the simulation hands them
// over directly. A field added here is added there too.
//
//	Renew        node -> host, one per interval (and on demand) per host: every
//	             route of the node whose shard the node believes the host owns.
//	             Answered with RenewReply.
//	RenewReply   host -> node, the answer to one Renew: one Grant per entry, in
//	             the same order.
//	Nudge        host -> node, no reply: renew now (budget freed for you, or a
//	             shard you asked for is now owned).
//	Handoff      host -> host, a shard's ledgers when its ownership moves to
//	             the receiver (Transfer); answered with HandoffAck.
//	HandoffAck   host -> host, no reply.

// Entry is one route in a Renew.
type Entry struct {
	Route string
	// Has is the grant the node enforces now: its last grant while that lease
	// is valid, 0 otherwise. The ledger counts at least this much for the
	// node until its next renewal.
	Has int
	// Held is the connections the node holds now (open and dialing).
	Held int
	// Need is the node's demand: connections in use plus callers waiting
	// (the most since its last renewal). The ledger divides the budget max-min
	// fair by need.
	Need int
	// Want is the share the node would like: its need rounded up to whole
	// blocks, plus a block of headroom, so that it asks now and then for a
	// block rather than for every connection. Headroom comes only out of
	// budget no need asks for.
	Want int
	// OnFloor is the floor the node enforces now because its lease lapsed
	// while the ledger could not be reached (0: not on its floor). A ledger in
	// safe mode may grant that much.
	OnFloor int
}

// Renew is a node's renewal to one host.
type Renew struct {
	Node NodeID
	// Seq grows with every Renew of this node (to any host): a host answers
	// one that is not newer than the last it answered with Stale.
	Seq uint64
	// Budget is the node's budget per route (Options.MaxConnsPerRoute):
	// nodes that disagree get the smallest.
	Budget int
	// FloorCap bounds the floor the node may use: > 0 a configured floor,
	// 0 the default (Budget / nodes), < 0 none.
	FloorCap int
	// Release: the node is leaving; the host forgets it once it holds
	// nothing.
	Release bool
	Entries []Entry
}

// Status is a Grant's outcome.
type Status uint8

const (
	// StatusOK: the ledger granted Grant until the reply's Lease.
	StatusOK Status = iota
	// StatusNotOwner: the host does not own the route's shard; Owner names
	// the host that does (or should), when the host knows it.
	StatusNotOwner
	// StatusMoving: the shard is being acquired or handed over; ask again
	// after RetryAfter. Leases held stay valid.
	StatusMoving
	// StatusFenced: the host cannot confirm its ownership with the
	// coordinator (etcd is unreachable from it): it renews nothing, and the
	// node may keep its floor for the reply's Vouch.
	StatusFenced
)

// Grant answers one Entry.
type Grant struct {
	Status Status
	Grant  int // the node's share until the lease ends (StatusOK)
	Budget int // the budget the ledger divides
	// Floor, with StatusOK: what the ledger counts for the node once its
	// lease lapses; with StatusFenced: the floor the host vouches for (what
	// the ledger counts for the node, at most the floor; 0: none).
	Floor int
	Epoch uint64 // the shard's ownership epoch
	Safe  bool   // the ledger is in safe mode: no grant above Has or OnFloor
	Nodes int    // nodes holding a lease on the route
	// RetryAfter, when set, is when asking again for more could be answered
	// differently (after others gave some back, the end of safe mode, the
	// shard's acquisition).
	RetryAfter time.Duration
	Owner      HostID // StatusNotOwner: the owner as the host knows it ("" unknown)
}

// RenewReply answers a Renew.
type RenewReply struct {
	Host HostID
	Seq  uint64
	// Stale: the Renew was older than one already answered; ignore the reply.
	Stale bool
	// Lease is how long the grants hold, counted from when the node sent the
	// Renew.
	Lease time.Duration
	// Vouch, with StatusFenced grants: how long the node may keep using its
	// floor on those routes (until an owner elsewhere can have taken them
	// over and left safe mode).
	Vouch time.Duration
	// Eager: nodes wait for budget this node holds; renew as soon as
	// connections close rather than at the next interval.
	Eager  bool
	Grants []Grant
}

// Nudge asks a node to renew with Host now.
type Nudge struct {
	Host HostID
}

// HolderState is one holder of a ledger in a Handoff.
type HolderState struct {
	Node                           NodeID
	Budget                         int
	Has, Held, Need, Want, OnFloor int
	Grant, Floor                   int
	Lapsed                         bool
	ExpiresIn                      time.Duration // from when the Handoff was sent
	Vouched                        int           // a fenced owner vouched for this floor
	VouchedFor                     time.Duration // from when the Handoff was sent
}

// LedgerState is one route's ledger in a Handoff.
type LedgerState struct {
	Route   string
	Holders []HolderState
}

// Handoff carries a shard's ledgers from its previous owner to the host it
// was transferred to, at the epoch the transfer made.
type Handoff struct {
	From  HostID
	Shard int
	Epoch uint64
	// ToSession is the receiver's session the transfer bound the shard to:
	// a receiver whose session has changed since owns nothing by it.
	ToSession int64
	Ledgers   []LedgerState
}

// HandoffAck confirms a Handoff.
type HandoffAck struct {
	From  HostID
	Shard int
	Epoch uint64
}
