package fleet

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/connactor/connactor/fleet/internal/protocol"
)

// hostName is the name of every member's budget host actor: a node reaches
// the host of a member at actor.NewPID(member address, hostName).
const hostName = "connactor-fleet-host"

// tickInterval is how often the host and keeper actors run their timers
// (leases, renewals, back-offs); events are handled at once.
const tickInterval = 50 * time.Millisecond

// member is one actor system's part in the fleet: its budget host (the
// ledgers of the shards it owns) and its session in the coordinator, which
// the keepers of every client with a fleet budget in the system share. It
// starts with the first keeper and leaves the fleet, handing its shards to
// the others, when the last one stops.
type member struct {
	sys    *actor.ActorSystem
	id     protocol.HostID // the actor system's address
	kind   KindConfig
	coord  coordinator
	logger *slog.Logger
	host   *actor.PID
	// hostDone is closed when the host actor has stopped.
	hostDone chan struct{}
	// leaving: the last keeper's leave asked the host to hand its shards
	// over. A host that restarts meanwhile (a new instance, which knows
	// nothing of the request) reads it here and leaves too.
	leaving atomic.Bool
	// handedOver is closed, once (handOnce), when the leaving host has no
	// shard left to hand over.
	handedOver chan struct{}
	handOnce   sync.Once
	// calls owns the goroutines of coordinator calls (the host actor's
	// acquisitions and transfers) and of the tickers.
	calls sync.WaitGroup

	// crashed: a test stopped the member as a process that dies would (no
	// handoff, no release, its session left to expire); stopping its
	// keepers then skips the graceful steps.
	crashed atomic.Bool

	// refs counts the keepers holding the member; guarded by members'
	// lock, so that the last keeper's leave and a new keeper's join are
	// ordered. A member with refs 0 is leaving: it stays in members until
	// it has gone, and nobody joins it.
	refs int
	// left is closed once the member has gone: its last keeper's leave
	// returned and its host stopped (its name is free again). Then it is
	// out of members, and a keeper that waited for it starts a new member.
	left chan struct{}
	// leaveReturned: leave has done all it waits for; the member has gone
	// once the host has stopped too (whichever comes last calls gone).
	leaveReturned atomic.Bool
	goneOnce      sync.Once

	mu      sync.Mutex
	keepers map[*actor.PID]bool
	reg     *protocol.Registry // the latest, for keepers that start later
}

// members holds each actor system's member from its first keeper's join
// until it has gone.
var members = struct {
	sync.Mutex
	m map[*actor.ActorSystem]*member
}{m: map[*actor.ActorSystem]*member{}}

// lookupMember returns sys's member, if it has one.
func lookupMember(sys *actor.ActorSystem) *member {
	members.Lock()
	defer members.Unlock()
	return members.m[sys]
}

// joinMember returns c's member, starting it for the first keeper: it spawns
// the host actor and opens the session (in the background). While the
// member's last keeper is leaving, it waits until the member has gone (that
// keeper's Stop bounds how long), then starts a new one: the leaving member
// hands its shards over and ends its session whatever joins meanwhile, and
// its host holds the host actor's name until it stops.
func joinMember(c *cluster.Cluster, newCoord func() coordinator, logger *slog.Logger) *member {
	for {
		members.Lock()
		m := members.m[c.ActorSystem]
		switch {
		case m == nil:
			m = startMember(c, newCoord(), logger)
			members.Unlock()
			return m
		case m.refs > 0:
			m.refs++
			members.Unlock()
			return m
		}
		members.Unlock()
		<-m.left
	}
}

// startMember makes c's member and registers it (members' lock held).
func startMember(c *cluster.Cluster, coord coordinator, logger *slog.Logger) *member {
	kind, _ := kindConfig(c)
	m := &member{sys: c.ActorSystem, id: protocol.HostID(c.ActorSystem.Address()), kind: kind, coord: coord,
		logger: logger, hostDone: make(chan struct{}), handedOver: make(chan struct{}), left: make(chan struct{}), keepers: map[*actor.PID]bool{}, refs: 1}
	members.m[c.ActorSystem] = m
	pid, err := c.ActorSystem.Root.SpawnNamed(withRestarts(func() actor.Actor { return &hostActor{} }), hostName)
	if err != nil {
		panic("fleet: internal error: the host actor's name is taken: " + err.Error()) // one member per system
	}
	m.host = pid
	m.coord.Open(m.id, m)
	return m
}

// leave releases a keeper's hold on the member; the last one makes it leave
// the fleet: the host hands its shards to the others (waiting at most until
// ctx ends), the session ends, the host stops. The member stays registered,
// with no keeper to join it, until it has gone.
func (m *member) leave(ctx context.Context) {
	members.Lock()
	m.refs--
	last := m.refs == 0
	members.Unlock()
	if !last {
		return
	}
	defer m.leaveDone()
	if m.crashed.Load() {
		m.sys.Root.Stop(m.host)
		<-m.hostDone
		m.calls.Wait()
		return
	}
	if err := m.coord.Leave(ctx); err != nil {
		m.logger.Debug("fleet: the member could not say in etcd that it leaves", slog.Any("error", err))
	}
	m.leaving.Store(true) // before the request: a host that fails handling it learns it at its restart
	m.sys.Root.Send(m.host, &hostLeaveRequest{})
	select {
	case <-m.handedOver:
	case <-m.hostDone:
	case <-ctx.Done():
	}
	m.sys.Root.Poison(m.host)
	select {
	case <-m.hostDone:
	case <-ctx.Done():
	}
	// The host's last grants end within a lease of its stop: the shards it
	// still owns stay its own until then.
	if err := m.coord.Close(ctx, m.kind.Lease+time.Second); err != nil {
		m.logger.Warn("fleet: the member's session in etcd did not end; it expires with its TTL", slog.Any("error", err))
	}
	m.calls.Wait()
}

// leaveDone records that leave has returned; the member has gone if its host
// has stopped too (else the host's Stopped calls hostStopped, which ends it).
func (m *member) leaveDone() {
	m.leaveReturned.Store(true)
	select {
	case <-m.hostDone:
		m.gone()
	default:
	}
}

// hostStopped is called by the host actor once it has stopped (hostDone
// closed): the member has gone if its leave has returned.
func (m *member) hostStopped() {
	if m.leaveReturned.Load() {
		m.gone()
	}
}

// handOver records that the leaving host has no shard left to hand over.
// The host calls it; more than once when it restarted meanwhile.
func (m *member) handOver() { m.handOnce.Do(func() { close(m.handedOver) }) }

// gone takes the member out of members and closes left, once.
func (m *member) gone() {
	m.goneOnce.Do(func() {
		members.Lock()
		if members.m[m.sys] == m {
			delete(members.m, m.sys) // a keeper started from now on makes a new member
		}
		members.Unlock()
		close(m.left)
	})
}

func (m *member) addKeeper(pid *actor.PID) *protocol.Registry {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keepers[pid] = true
	return m.reg
}

// registry returns the latest registry (nil: none yet), for a host that
// restarts.
func (m *member) registry() *protocol.Registry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reg
}

func (m *member) removeKeeper(pid *actor.PID) {
	m.mu.Lock()
	delete(m.keepers, pid)
	m.mu.Unlock()
}

// tell sends msg to the host and every keeper.
func (m *member) tell(msg any) {
	m.mu.Lock()
	pids := make([]*actor.PID, 0, len(m.keepers)+1)
	pids = append(pids, m.host)
	for pid := range m.keepers {
		pids = append(pids, pid)
	}
	m.mu.Unlock()
	for _, pid := range pids {
		m.sys.Root.Send(pid, msg)
	}
}

// Registry, Confirmed and SessionLost are the coordinator's events
// (coordEvents), handed to the actors as messages.
func (m *member) Registry(reg *protocol.Registry) {
	m.mu.Lock()
	m.reg = reg
	m.mu.Unlock()
	m.tell(&registryChanged{reg: reg})
}

func (m *member) Confirmed(session int64, until time.Time) {
	m.sys.Root.Send(m.host, &sessionConfirmed{session: session, until: until}) // only hosts fence on it
}

func (m *member) SessionLost() { m.tell(&sessionLost{}) }

// nodePID is the keeper actor a NodeID names ("address/id").
func nodePID(n protocol.NodeID) *actor.PID {
	addr, id, _ := strings.Cut(string(n), "/")
	return actor.NewPID(addr, id)
}

// hostPID is the budget host actor of the member a HostID names (its
// address).
func hostPID(h protocol.HostID) *actor.PID { return actor.NewPID(string(h), hostName) }

// nodeID names a keeper actor.
func nodeID(pid *actor.PID) protocol.NodeID { return protocol.NodeID(pid.Address + "/" + pid.Id) }

// ticker sends msg to pid every tickInterval until stop is closed; the
// goroutine is the member's (calls).
func (m *member) ticker(pid *actor.PID, msg any, stop <-chan struct{}) {
	m.calls.Go(func() {
		t := time.NewTicker(tickInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				m.sys.Root.Send(pid, msg)
			case <-stop:
				return
			}
		}
	})
}

// Messages from the member to its actors. No reply.
type (
	// registryChanged carries a new version of the registry.
	registryChanged struct{ reg *protocol.Registry }
	// sessionConfirmed: the member's session lives at least until until.
	sessionConfirmed struct {
		session int64
		until   time.Time
	}
	// sessionLost: the member's session expired; a new one follows.
	sessionLost struct{}
)
