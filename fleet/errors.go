package fleet

import "errors"

// ErrInvalidConfig is returned (wrapped, with the reason) by New and
// Budget.StartKeeper when the configuration cannot work: no cluster, no
// budget, no etcd client, a cluster without the budget host's kind, or not
// started.
var ErrInvalidConfig = errors.New("fleet: invalid config")

// ErrStopped is returned by a keeper's Snapshot once the keeper has stopped.
var ErrStopped = errors.New("fleet: keeper stopped")

// ErrBadMessage is logged (wrapped) when a message from the cluster is not
// one the protocol can act on (a field it must have is missing, a count is
// negative): a member running another version, or a bug. The host answers
// such a request with nothing; the keeper's renewal then fails at its
// timeout. Bytes protobuf cannot read never reach the fleet: protoactor's
// remote logs them and ends the stream they came on.
var ErrBadMessage = errors.New("fleet: malformed cluster message")

// ErrCorruptKey is logged (wrapped, with the key, its value and revision)
// when a key of the fleet in etcd does not hold what the fleet writes there
// (another program or version wrote it): a shard whose owner or epoch
// cannot be read is taken by nobody while the key stays, since whoever
// wrote it may be granting the shard's budget. Delete the key, or let it
// go with its lease, to give the shard back to the fleet.
var ErrCorruptKey = errors.New("fleet: unreadable key in etcd")

// ErrCallTimeout is given (wrapped) to the keeper's OnRenewal when a budget
// host did not answer a renewal in time. The leases the node holds stay
// valid until they expire. It is a net.Error whose Timeout() is true.
var ErrCallTimeout error = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string   { return "fleet: budget host did not answer in time" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
