package fleet

import (
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// restartStrategy supervises the host and keeper actors, as their guardian:
// one that fails (panics) is restarted, as protoactor's default supervision
// does (one that fails more than 10 times in 10 s is stopped), and each
// restart is logged once at WARN, each such stop at ERROR, through the
// member's logger, with the actor's name and the panic's value (protoactor
// logs them to its console logger, which stays silenced). It is one value for
// every member, so that protoactor keeps one guardian process per actor
// system.
var restartStrategy actor.SupervisorStrategy = loggedStrategy{actor.DefaultSupervisorStrategy()}

// withRestarts returns the props of a host or keeper actor made by produce,
// supervised by restartStrategy.
func withRestarts(produce actor.Producer) *actor.Props {
	return actor.PropsFromProducer(produce, actor.WithGuardian(restartStrategy))
}

// loggedStrategy is a strategy that logs what it does to a child.
type loggedStrategy struct{ actor.SupervisorStrategy }

func (s loggedStrategy) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
	rs *actor.RestartStatistics, reason, msg any) {
	s.SupervisorStrategy.HandleFailure(sys, loggedSupervisor{Supervisor: sup, sys: sys, reason: reason}, child, rs, reason, msg)
}

// loggedSupervisor logs the restarts and stops of one failure.
type loggedSupervisor struct {
	actor.Supervisor
	sys    *actor.ActorSystem
	reason any
}

func (s loggedSupervisor) RestartChildren(pids ...*actor.PID) {
	for _, pid := range pids {
		s.logger().Warn("fleet: an actor failed and was restarted", slog.String("actor", pid.Id),
			slog.String("reason", fmt.Sprint(s.reason)))
	}
	s.Supervisor.RestartChildren(pids...)
}

func (s loggedSupervisor) StopChildren(pids ...*actor.PID) {
	for _, pid := range pids {
		s.logger().Error("fleet: an actor failed too often and was stopped", slog.String("actor", pid.Id),
			slog.String("reason", fmt.Sprint(s.reason)))
	}
	s.Supervisor.StopChildren(pids...)
}

// logger is the logger of the actor system's member (slog's default when it
// has none).
func (s loggedSupervisor) logger() *slog.Logger {
	if m := lookupMember(s.sys); m != nil {
		return m.logger
	}
	return slog.Default()
}
