package fleet

import "github.com/asynkron/protoactor-go/actor"

// Crash stops sys's fleet member as a process that dies would, as seen from
// the rest of the fleet: its session is left to expire in etcd (no
// keepalive, no revoke), its shards are not handed over, its keepers give
// nothing back. The service's later Close of its client only stops the
// actors.
func Crash(sys *actor.ActorSystem) {
	m := lookupMember(sys)
	if m == nil {
		return
	}
	m.crashed.Store(true)
	if e, ok := m.coord.(*etcdCoordinator); ok {
		e.crash()
	}
}
