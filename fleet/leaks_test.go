package fleet

import "go.uber.org/goleak"

// leakIgnores lists the goroutines protoactor leaves behind on purpose, each
// by its top function:
//   - the dead-letter throttle's ticker goroutine of every actor system
//     (actor.NewThrottle starts one that never ends; NewDeadLetter calls it).
func leakIgnores() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
	}
}
