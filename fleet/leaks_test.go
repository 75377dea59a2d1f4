package fleet

import "go.uber.org/goleak"

// leakIgnores lists goroutines protoactor leaves behind for good, each by its
// top function. None is ours; each is a loop with no way to end it:
//   - actor.NewThrottle's ticker goroutine, started for every actor system's
//     dead-letter throttle (NewDeadLetter) and for the cluster's gossiper
//     (Gossiper.StartGossiping) and gossip actor (NewThrottleWithLogger);
//   - the test provider's TTL loop (test.Provider.startTtlReport): Shutdown
//     stops its ticker, which does not close the ticker's channel, so the
//     `for range ticker.C` loop waits forever;
//   - gRPC client connections of the survivors' endpoint writers to a member
//     that died (grpc addrConn.resetTransportAndUnlock and its
//     CallbackSerializer.run goroutines): remote/endpoint_writer.go's
//     initialize retries initializeInternal MaxRetryCount times, and each
//     try dials a new grpc.ClientConn into state.conn without closing the
//     one before, so only the last is closed when the writer stops.
func leakIgnores() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster.NewGossipActor.NewThrottleWithLogger.func2.1"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/cluster/clusterproviders/test.(*Provider).startTtlReport.func1"),
		goleak.IgnoreTopFunction("google.golang.org/grpc.(*addrConn).resetTransportAndUnlock"),
		goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
	}
}
