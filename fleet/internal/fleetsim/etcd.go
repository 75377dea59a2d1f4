package fleetsim

import (
	"slices"
	"time"

	"github.com/connactor/connactor/fleet/internal/protocol"
)

// etcd is the simulated coordinator: what the fleet keeps in etcd, with its
// semantics. Sessions are leases with a TTL, renewed by keepalives; a lease
// that runs out takes its keys with it (the host's and node's registration,
// the shards the host owns). A shard's owner is taken by compare-and-swap,
// with an epoch that grows at every change. While etcd is down nothing
// expires, and when it comes back every lease gets a whole TTL again (as
// etcd's leader does when it is elected).
type etcd struct {
	s      *Sim
	ttl    time.Duration
	down   bool
	rev    int64
	leases map[int64]*lease
	nextID int64
	owners map[int]owner
	epochs map[int]uint64
	reg    *protocol.Registry
	// Registrations of the members started together at the beginning,
	// published as one revision.
	pendingHosts []protocol.HostInfo
	pendingNodes []protocol.NodeID
}

// publish makes one revision of the registrations made while starting.
func (e *etcd) publish() {
	e.change(e.pendingHosts, nil, e.pendingNodes, nil)
	e.pendingHosts, e.pendingNodes = nil, nil
}

type lease struct {
	id      int64
	expires time.Time
	m       *member
	gen     int
	host    protocol.HostInfo
	node    protocol.NodeID
	shards  map[int]bool
}

type owner struct {
	host  protocol.HostID
	lease int64
	epoch uint64
	from  protocol.HostID
}

func newEtcd(s *Sim, ttl time.Duration) *etcd {
	return &etcd{s: s, ttl: ttl, leases: map[int64]*lease{}, owners: map[int]owner{}, epochs: map[int]uint64{},
		reg: protocol.NewRegistry(0, nil, nil)}
}

// grant opens a session for m's incarnation gen and registers its host and
// node under it.
func (e *etcd) grant(m *member, gen int) *lease {
	e.nextID++
	l := &lease{id: e.nextID, expires: e.s.c.now.Add(e.ttl), m: m, gen: gen, shards: map[int]bool{}}
	l.host = protocol.HostInfo{ID: m.hostID(), Lease: l.id}
	l.node = m.nodeID()
	e.leases[l.id] = l
	if e.s.starting {
		e.pendingHosts = append(e.pendingHosts, l.host)
		e.pendingNodes = append(e.pendingNodes, l.node)
	} else {
		e.change([]protocol.HostInfo{l.host}, nil, []protocol.NodeID{l.node}, nil)
	}
	e.s.c.at(l.expires, func() { e.expire(l) })
	return l
}

func (e *etcd) keepalive(id int64) bool {
	l := e.leases[id]
	if l == nil {
		return false
	}
	l.expires = e.s.c.now.Add(e.ttl)
	e.s.c.at(l.expires, func() { e.expire(l) })
	return true
}

// expire ends l if its time has come (a keepalive since moved it on).
func (e *etcd) expire(l *lease) {
	if e.down || e.leases[l.id] != l || e.s.c.now.Before(l.expires) {
		return
	}
	e.revoke(l.id)
}

func (e *etcd) revoke(id int64) { e.end(id, 0) }

// close ends a session gracefully: the shards it still owns are bound to a
// tombstone lease of hold (a lease and a second) that nobody keeps alive, so
// that no other host takes them before the grants made under them ended.
func (e *etcd) close(id int64, hold time.Duration) { e.end(id, hold) }

func (e *etcd) end(id int64, hold time.Duration) {
	l := e.leases[id]
	if l == nil {
		return
	}
	delete(e.leases, id)
	var tomb *lease
	if hold > 0 {
		e.nextID++
		tomb = &lease{id: e.nextID, expires: e.s.c.now.Add(hold), shards: map[int]bool{}}
		e.leases[tomb.id] = tomb
		e.s.c.at(tomb.expires, func() { e.expire(tomb) })
	}
	for s := range l.shards {
		o := e.owners[s]
		switch {
		case o.lease != id:
		case tomb != nil:
			o.lease = tomb.id
			e.owners[s] = o
			tomb.shards[s] = true
		default:
			delete(e.owners, s)
		}
	}
	if l.host.ID != "" { // a tombstone registered nothing
		e.change(nil, []protocol.HostID{l.host.ID}, nil, []protocol.NodeID{l.node})
	}
}

// leaving marks the host of session id as leaving (its registration says
// so: no shard is placed on it).
func (e *etcd) leaving(id int64) {
	if l := e.leases[id]; l != nil && !e.down {
		l.host.Leaving = true
		e.change([]protocol.HostInfo{l.host}, nil, nil, nil)
	}
}

// change makes the registry's next revision and sends it to every member.
func (e *etcd) change(addHosts []protocol.HostInfo, removeHosts []protocol.HostID, addNodes, removeNodes []protocol.NodeID) {
	e.rev++
	e.reg = e.reg.Next(e.rev, addHosts, removeHosts, addNodes, removeNodes)
	for _, m := range e.s.members {
		m.watch(e.reg)
	}
}

// setDown takes etcd down or brings it back; back, every lease gets a whole
// TTL and every member's watch catches up.
func (e *etcd) setDown(down bool) {
	e.down = down
	if down {
		return
	}
	ids := make([]int64, 0, len(e.leases))
	for id := range e.leases {
		ids = append(ids, id)
	}
	slices.Sort(ids) // in order: the expiries fall at one time, and their order counts
	for _, id := range ids {
		l := e.leases[id]
		l.expires = e.s.c.now.Add(e.ttl)
		e.s.c.at(l.expires, func() { e.expire(l) })
	}
	// Each member's etcd client finds etcd again when its reconnection's
	// back-off next tries (gRPC's grows to seconds during an outage): some
	// only after their sessions' refreshed TTL has run out.
	for _, m := range e.s.members {
		m.etcdFrom = e.s.c.now.Add(time.Duration(e.s.c.rng.Int64N(int64(e.s.cfg.EtcdReconnect) + 1)))
		e.s.c.at(m.etcdFrom, func() { m.watch(e.reg) })
	}
}

// acquireResult is the outcome of taking a shard.
type acquireResult struct {
	ok    bool // the caller owns the shard now
	epoch uint64
	prev  bool            // it had an owner before (the caller's new ownership)
	owner protocol.HostID // the owner (when it is not the caller)
	from  protocol.HostID // the caller got it by a transfer from this host
}

// acquire takes shard s for lease id if it has no owner. Asked again after
// an answer was lost, it finds the caller's own ownership.
func (e *etcd) acquire(id int64, s int) acquireResult {
	l := e.leases[id]
	if l == nil {
		return acquireResult{}
	}
	if o, ok := e.owners[s]; ok {
		if o.lease == id {
			return acquireResult{ok: true, epoch: o.epoch, prev: o.epoch > 1 || o.from != "", from: o.from}
		}
		return acquireResult{owner: o.host, epoch: o.epoch}
	}
	e.epochs[s]++
	o := owner{host: l.host.ID, lease: id, epoch: e.epochs[s]}
	e.owners[s] = o
	l.shards[s] = true
	return acquireResult{ok: true, epoch: o.epoch, prev: o.epoch > 1}
}

// transfer moves shards owned by lease id at epochs to host to (bound to its
// lease), all or none. Asked again after an answer was lost, it finds the
// transfer done. lost says the caller no longer owns them.
func (e *etcd) transfer(id int64, shards []int, epochs []uint64, to protocol.HostInfo) (newEpochs []uint64, ok, lost bool) {
	from := e.leases[id]
	dest := e.leases[to.Lease]
	done := true
	for i, s := range shards {
		o := e.owners[s]
		if !(o.host == to.ID && o.from == from.hostIDOrEmpty() && o.epoch == epochs[i]+1) {
			done = false
		}
	}
	if done && from != nil {
		for i := range shards {
			newEpochs = append(newEpochs, epochs[i]+1)
		}
		return newEpochs, true, false
	}
	if from == nil {
		return nil, false, true
	}
	for i, s := range shards {
		if o := e.owners[s]; o.lease != id || o.epoch != epochs[i] {
			return nil, false, true
		}
	}
	if dest == nil {
		return nil, false, false
	}
	for i, s := range shards {
		e.epochs[s] = epochs[i] + 1
		e.owners[s] = owner{host: to.ID, lease: to.Lease, epoch: epochs[i] + 1, from: from.host.ID}
		delete(from.shards, s)
		dest.shards[s] = true
		newEpochs = append(newEpochs, epochs[i]+1)
	}
	return newEpochs, true, false
}

func (l *lease) hostIDOrEmpty() protocol.HostID {
	if l == nil {
		return ""
	}
	return l.host.ID
}
