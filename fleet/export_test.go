package fleet

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/connactor/connactor/fleet/internal/protocol"
)

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

// EtcdCoordinator is the etcd coordinator, for the tests in package
// fleet_test that run it on a real etcd (they can import fleettest, which
// imports this package).
type EtcdCoordinator = etcdCoordinator

// NewEtcdCoordinator returns host's coordinator on cli under prefix, with no
// session and no loop: OpenSession opens one.
func NewEtcdCoordinator(cli *clientv3.Client, prefix string, host protocol.HostID) *EtcdCoordinator {
	e := newEtcdCoordinator(cli, prefix, 5*time.Second, slog.New(slog.DiscardHandler))
	e.host, e.events = host, nopEvents{}
	return e
}

// OpenSession opens the session, as the keepalive loop does when there is
// none.
func (e *etcdCoordinator) OpenSession() error { return e.openSession() }

// RegisterPending tries the registrations that failed again, as the
// keepalive loop does after each keepalive.
func (e *etcdCoordinator) RegisterPending() {
	e.mu.Lock()
	lease := e.lease
	e.mu.Unlock()
	e.registerPending(lease)
	e.settle(lease)
}

// AcquireShard takes shard, and says whether the host owns it.
func (e *etcdCoordinator) AcquireShard(ctx context.Context, shard int) (bool, error) {
	res, err := e.Acquire(ctx, shard)
	return res.ok, err
}

// Keys are the keys of the registry and the owners, as the tests read them.
func (e *etcdCoordinator) HostKey(h protocol.HostID) string { return e.hostKey(h) }
func (e *etcdCoordinator) NodeKey(n protocol.NodeID) string { return e.nodeKey(n) }
func (e *etcdCoordinator) OwnKey(s int) string              { return e.ownKey(s) }
func (e *etcdCoordinator) EpochKey(s int) string            { return e.epochKey(s) }

// LeavingMark ends a host key's value when the host leaves.
const LeavingMark = leavingMark
