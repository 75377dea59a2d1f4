package client

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// client the tests start must be closed, with all its goroutines gone.
//
// One goroutine is protoactor's, not ours: the dead-letter log throttle starts a
// timer goroutine that ends one second (DeadLetterThrottleInterval) after a dead
// letter, and Close produces dead letters (idle watchers reporting their closed
// sockets to route actors that have stopped).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}
