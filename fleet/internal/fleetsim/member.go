package fleetsim

import (
	"fmt"
	"time"

	"github.com/connactor/connactor/fleet/internal/protocol"
)

// member is one process of the fleet: a ledger host, a keeper, and a
// connection pool per route that opens connections up to the keeper's share
// and the route's demand. A restart makes a new incarnation (gen), with new
// ids, as a restarted process gets a new address.
type member struct {
	s     *Sim
	i     int
	gen   int
	alive bool
	// partitioned: cut off from etcd and from every member not partitioned.
	partitioned bool
	leaving     bool

	host   *protocol.Host
	keeper *protocol.Keeper
	lease  int64

	reg   *protocol.Registry // the version this member's watch delivered last
	regAt time.Time          // when the last registry delivery was due (the watch is ordered)

	pools map[int]*pool // by route index
	order []*pool       // the same, in the order they were made
	// soon: a Tick is scheduled right after the current event (a demand
	// change or a nudge asks for one).
	soon bool

	// etcdFrom: the member's etcd client reaches etcd again from then on
	// (after an outage, its reconnection's back-off).
	etcdFrom time.Time

	// Counts for the figures.
	sent, hostMsgs uint64
}

func (m *member) hostID() protocol.HostID {
	return protocol.HostID(fmt.Sprintf("m%04d.%d", m.i, m.gen))
}
func (m *member) nodeID() protocol.NodeID {
	return protocol.NodeID(fmt.Sprintf("m%04d.%d/k", m.i, m.gen))
}

// start starts incarnation gen: a session in etcd (registering the host and
// the node), a host and a keeper, their ticks and the keepalives.
func (m *member) start() {
	m.gen++
	m.alive, m.leaving = true, false
	gen := m.gen
	sink := &memberSink{m: m, gen: gen}
	m.host = protocol.NewHost(protocol.HostConfig{ID: m.hostID(), Lease: m.s.cfg.Lease, Shards: m.s.cfg.Shards}, sink)
	m.keeper = protocol.NewKeeper(protocol.KeeperConfig{Node: m.nodeID(), Budget: m.s.cfg.Budget, Lease: m.s.cfg.Lease,
		Shards: m.s.cfg.Shards}, sink)
	m.reg = nil
	m.openSession(gen)
	phase := time.Duration(m.s.c.rng.Int64N(int64(tick)))
	m.s.c.after(phase, func() { m.tick(gen) })
	m.s.c.after(phase, func() { m.keepalive(gen) })
}

func (m *member) live(gen int) bool { return m.alive && m.gen == gen }

// openSession registers this incarnation in etcd: in the simulation the
// registration itself is not delayed (the member starts serving after).
func (m *member) openSession(gen int) {
	l := m.s.etcd.grant(m, gen)
	m.lease = l.id
	now := m.s.c.now
	until := now.Add(m.s.cfg.TTL)
	m.host.Confirmed(l.id, until)
	m.watch(m.s.etcd.reg)
}

// tick is how often a member's keeper and host run their timers. The fleet's
// actors tick every 50 ms; the simulation every 100 ms, and at once after
// the events that call for a renewal (a demand change, a nudge), to keep
// large runs to minutes.
const tick = 100 * time.Millisecond

func (m *member) tick(gen int) {
	if !m.live(gen) {
		return
	}
	now := m.s.c.now
	m.keeper.Tick(now)
	m.host.Tick(now)
	if m.leaving && m.host.Owned() == 0 && m.host.Pending() == 0 {
		m.finishLeave()
		return
	}
	m.s.c.after(tick, func() { m.tick(gen) })
}

// tickSoon runs the keeper's timers right after the current event, once
// however many events ask for it.
func (m *member) tickSoon() {
	if m.soon {
		return
	}
	m.soon = true
	gen := m.gen
	m.s.c.after(0, func() {
		m.soon = false
		if m.live(gen) {
			m.keeper.Tick(m.s.c.now)
		}
	})
}

// keepalive renews the session every second; the confirmation counts from
// when it was sent.
func (m *member) keepalive(gen int) {
	if !m.live(gen) {
		return
	}
	sent := m.s.c.now
	id := m.lease
	m.s.toEtcdResult(m, func() any { return m.s.etcd.keepalive(id) }, func(res any, answered bool) {
		if !m.live(gen) || id != m.lease || !answered {
			return // unanswered: the next keepalive tries again
		}
		if res.(bool) {
			until := sent.Add(m.s.cfg.TTL)
			m.host.Confirmed(id, until)
			return
		}
		// The session expired: every key bound to it is gone. Register
		// again under a new one.
		m.host.SessionLost()
		m.keeper.SessionLost()
		m.openSession(gen)
	})
	m.s.c.after(time.Second, func() { m.keepalive(gen) })
}

// watch delivers a registry version to this member after a delay, in order.
func (m *member) watch(reg *protocol.Registry) {
	if !m.alive || m.partitioned || m.s.etcd.down || m.s.c.now.Before(m.etcdFrom) {
		return
	}
	gen := m.gen
	at := m.s.c.now.Add(m.s.net.delay())
	if at.Before(m.regAt) {
		at = m.regAt
	}
	m.regAt = at
	m.s.c.at(at, func() {
		if !m.live(gen) || reg.Rev <= m.reg.Revision() {
			return
		}
		m.reg = reg
		m.host.SetRegistry(reg, m.s.c.now)
		m.keeper.SetRegistry(reg, m.s.c.now)
	})
}

// crash ends the process at once: its connections die with it, its session
// runs out in etcd after the TTL.
func (m *member) crash() {
	m.alive = false
	for _, p := range m.order {
		p.dropAll()
	}
}

// leave stops the member gracefully: the pools close their connections, the
// keeper gives its shares back, the host hands its shards over; then the
// session is revoked (finishLeave).
func (m *member) leave() {
	if !m.alive || m.leaving {
		return
	}
	m.leaving = true
	now := m.s.c.now
	for _, p := range m.order {
		p.dropAll()
	}
	for _, p := range m.order {
		m.keeper.Usage(m.s.routes[p.route], 0, 0, 0, now)
	}
	m.keeper.Release(now)
	id := m.lease
	m.s.toEtcdResult(m, func() any { m.s.etcd.leaving(id); return nil }, func(any, bool) {})
	m.host.Leave(now)
	gen := m.gen
	m.s.c.after(5*time.Second, func() { // shards that could not move are released with the session
		if m.live(gen) && m.leaving {
			m.finishLeave()
		}
	})
}

func (m *member) finishLeave() {
	m.alive = false
	id := m.lease
	hold := m.s.cfg.Lease + time.Second
	m.s.toEtcdResult(m, func() any { m.s.etcd.close(id, hold); return true }, func(any, bool) {})
}

// memberSink is the host's and keeper's outside world: the network and
// etcd, for one incarnation.
type memberSink struct {
	m   *member
	gen int
}

func (k *memberSink) Send(to protocol.HostID, r protocol.Renew) {
	m := k.m
	m.sent++
	s := m.s
	dest := s.hosts[to]
	s.send(m, dest, func() {
		dest.m.hostMsgs++
		s.requests += uint64(len(r.Entries))
		var rep protocol.RenewReply
		if s.requests%cpuSampleEvery == 0 {
			// Every so many renewals, the host's CPU time for it: reading
			// the clock costs more than a small renewal.
			start := threadCPU()
			rep = dest.m.host.HandleRenew(r, s.c.now)
			s.cpu += threadCPU() - start
			s.cpuRequests += uint64(len(r.Entries))
		} else {
			rep = dest.m.host.HandleRenew(r, s.c.now)
		}
		dest.m.hostMsgs++
		s.send(dest.m, endpoint{m, k.gen}, func() { m.keeper.HandleReply(rep, s.c.now) })
	})
}

// ShareChanged reaches the pool as the supervisor's message does: after the
// keeper's Tick, not inside it.
func (k *memberSink) ShareChanged(route string, share, budget int) {
	m := k.m
	p := m.pools[m.s.routeIndex[route]]
	if p == nil {
		return
	}
	m.s.c.after(0, func() {
		if m.live(k.gen) {
			p.setShare(share)
		}
	})
}

func (k *memberSink) Renewed(protocol.HostID, time.Duration, error) {}

func (k *memberSink) Nudge(to protocol.NodeID, n protocol.Nudge) {
	m, s := k.m, k.m.s
	m.hostMsgs++
	dest := s.nodes[to]
	s.send(m, dest, func() {
		dest.m.keeper.Nudged(n.Host)
		dest.m.tickSoon()
	})
}

// untilKnown runs op at etcd for the incarnation's session, asking again
// while its outcome is unknown (no answer), and hands a known outcome to done.
func (k *memberSink) untilKnown(op func(lease int64) any, done func(res any)) {
	m, s, gen := k.m, k.m.s, k.gen
	id := m.lease
	var try func()
	try = func() {
		s.toEtcdResult(m, func() any { return op(id) }, func(res any, ok bool) {
			switch {
			case !m.live(gen) || id != m.lease:
			case !ok:
				s.c.after(200*time.Millisecond, try)
			default:
				done(res)
			}
		})
	}
	try()
}

func (k *memberSink) Acquire(shard int) {
	m, s := k.m, k.m.s
	k.untilKnown(func(id int64) any { return s.etcd.acquire(id, shard) }, func(res any) {
		r, now := res.(acquireResult), s.c.now
		switch {
		case r.ok && r.from != "":
			m.host.OwnedAlready(shard, r.epoch, r.from, now)
		case r.ok:
			m.host.Acquired(shard, r.epoch, r.prev, now)
		default:
			m.host.AcquireFailed(shard, r.owner, now)
		}
	})
}

type transferResult struct {
	epochs   []uint64
	ok, lost bool
}

func (k *memberSink) Transfer(shards []int, epochs []uint64, to protocol.HostInfo) {
	m, s := k.m, k.m.s
	k.untilKnown(func(id int64) any {
		e, ok, lost := s.etcd.transfer(id, shards, epochs, to)
		return transferResult{e, ok, lost}
	}, func(res any) {
		if r := res.(transferResult); r.ok {
			m.host.Transferred(shards, epochs, r.epochs, to, s.c.now)
		} else {
			m.host.TransferFailed(shards, epochs, r.lost, s.c.now)
		}
	})
}

func (k *memberSink) SendHandoff(to protocol.HostID, h protocol.Handoff) {
	m, s := k.m, k.m.s
	m.hostMsgs++
	dest := s.hosts[to]
	s.send(m, dest, func() {
		dest.m.hostMsgs++
		dest.m.host.ReceiveHandoff(h, s.c.now)
	})
}

func (k *memberSink) SendHandoffAck(to protocol.HostID, a protocol.HandoffAck) {
	m, s := k.m, k.m.s
	m.hostMsgs++
	dest := s.hosts[to]
	s.send(m, dest, func() { dest.m.host.ReceiveHandoffAck(a) })
}
