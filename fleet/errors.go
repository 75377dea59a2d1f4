package fleet

import "errors"

// ErrInvalidConfig is returned (wrapped, with the reason) by New when the Config
// cannot work: no cluster, no budget, no supervisor PID, or a negative duration.
var ErrInvalidConfig = errors.New("fleet: invalid config")

// ErrStopped is returned by Snapshot and Stop once the keeper has stopped.
var ErrStopped = errors.New("fleet: keeper stopped")

// ErrBadMessage is returned (wrapped) when a message from the cluster is not a
// well-formed fleet message: a member running another version, or a bug. The
// grain answers such a request with nothing; the keeper treats it as a failed
// call.
var ErrBadMessage = errors.New("fleet: malformed cluster message")

// ErrCallTimeout is returned (wrapped) to Config.OnRenewal when a budget grain
// did not answer within Config.CallTimeout. The lease the node holds stays
// valid until it expires. It is a net.Error whose Timeout() is true.
var ErrCallTimeout error = timeoutError{}

type timeoutError struct{}

func (timeoutError) Error() string   { return "fleet: budget grain did not answer in time" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
