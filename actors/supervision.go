package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Supervision: what happens when one of connactor's actors panics. All three
// strategies are set here, and only here.
//
//   - A connection actor that fails is stopped (ConnStrategy, on the route's
//     props): its route closes the connection and frees its place. Restarting
//     it would hide a socket in an unknown state.
//   - A route actor that fails is stopped (RouteStrategy, on the supervisor's
//     props): a restarted instance would have lost track of its sockets. Its
//     Stopping answers its waiters and the request it failed on, its
//     connections stop with it (protoactor stops children first), its
//     mailbox, closed when it has stopped, answers what still reaches it
//     (every caller gets ErrRouteFailed at once), and the supervisor closes
//     the route's Done channel and reclaims its places; the next request
//     starts a new route actor.
//   - The supervisor that fails is restarted (SupervisorStrategy, as the
//     guardian of the client's supervisor): the old instance answers the
//     request it failed on (ErrSupervisorFailed), protoactor stops its routes
//     first, and the new instance starts from zero with every place free; it
//     keeps the mailbox, and answers what waits there.
//
// Connection and route failures are logged once at ERROR with the panic's
// value; a supervisor failure is logged by the restarting instance.
type Supervision struct {
	Conn, Route actor.SupervisorStrategy
}

// NewSupervision returns the strategies of a client's routes and connections,
// logging to log.
func NewSupervision(log *slog.Logger) Supervision {
	stop := func(what string) actor.DeciderFunc {
		return func(reason any) actor.Directive {
			log.Error("connactor: "+what+" actor failed; stopped", "reason", fmt.Sprint(reason))
			return actor.StopDirective
		}
	}
	return Supervision{
		Conn:  actor.NewOneForOneStrategy(0, 0, stop("connection")),
		Route: actor.NewOneForOneStrategy(0, 0, stop("route")),
	}
}

// SupervisorStrategy restarts a failed supervisor, up to 100 times in 10
// seconds (a supervisor failing faster than that is stopped: the client then
// answers every request with ErrClosed). It is one value for every client, so
// that protoactor keeps one guardian process per actor system, not one per
// client.
var SupervisorStrategy = actor.NewOneForOneStrategy(100, 10*time.Second,
	func(any) actor.Directive { return actor.RestartDirective })

// FaultHook, when set in a config, is called at the start of every Receive of
// the route actors and the supervisor with the actor's kind ("route",
// "supervisor") and the message, and by a route when it grants a lease, with
// "granted" and the LeaseRequest. It exists for fault-injection tests, which
// panic in it to fail an actor as a bug would, and for tests that watch the
// order of events; production configs leave it nil.
type FaultHook func(kind string, msg any)
