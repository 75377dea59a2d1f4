package protocol

import (
	"container/heap"
	"slices"
	"sort"
	"time"
)

// HostConfig configures a Host. Zero values take the defaults.
type HostConfig struct {
	ID     HostID
	Lease  time.Duration // how long a grant holds (default DefaultLease)
	Shards int           // default DefaultShards; every member must use the same
	// Turn is how long a holder keeps a unit above the fair level while
	// others wait (default Lease/3): one to two turns, staggered, after
	// which the host nudges it to give the unit up.
	Turn time.Duration
	// Settle is how long a host must have been registered before shards are
	// handed to it (default Lease): a member that flaps moves nothing.
	Settle time.Duration
}

// DefaultLease is how long a grant holds: nodes renew every third of it, a
// dead node's grant returns within about one lease, and a shard that moves
// without its ledgers stays in safe mode for one lease.
const DefaultLease = 3 * time.Second

func (c *HostConfig) fill() {
	fillShared(&c.Lease, &c.Shards)
	if c.Turn <= 0 {
		c.Turn = c.Lease / 3
	}
	if c.Settle <= 0 {
		c.Settle = c.Lease
	}
}

// fillShared fills the defaults every host and keeper of a fleet must share.
func fillShared(lease *time.Duration, shards *int) {
	if *lease <= 0 {
		*lease = DefaultLease
	}
	if *shards <= 0 {
		*shards = DefaultShards
	}
}

// HostSink is what a Host asks of its surroundings: messages to nodes and
// hosts, and changes of ownership in the coordinator. Each call must return
// at once; results come back as calls of the Host's methods.
type HostSink interface {
	Nudge(to NodeID, n Nudge)
	// Acquire asks the coordinator for shard's ownership: Acquired or
	// AcquireFailed follows.
	Acquire(shard int)
	// Transfer asks the coordinator to move the shards (owned at epochs) to
	// host to, atomically with the shards' epochs: Transferred or
	// TransferFailed follows.
	Transfer(shards []int, epochs []uint64, to HostInfo)
	SendHandoff(to HostID, h Handoff)
	SendHandoffAck(to HostID, a HandoffAck)
}

// Host is a ledger host: the shards it owns and their ledgers. It is a plain
// value, driven by one goroutine (the host actor, or the simulation) and
// given the time with every call.
//
// Ownership is fenced by the coordinator (etcd): a shard's owner holds its
// key, bound to the owner's session, and takes it by compare-and-swap, so no
// two hosts own a shard at once whatever their views of the membership. An
// owner grants only while it can confirm its session (its grants end before
// the session could have expired), so that a host cut off from etcd stops
// granting before another can take its shards over.
type Host struct {
	cfg  HostConfig
	sink HostSink

	reg      *Registry
	regSince map[HostID]time.Time // when each registered host was first seen
	gone     map[HostID]bool      // hosts the registry dropped (and has not listed again)
	// session is the coordinator's id of the host's session (its lease in
	// etcd; 0: none): the shards the host owns are bound to it.
	session int64
	// confirmedUntil: the session lives at least until then (the
	// coordinator's last confirmation).
	confirmedUntil time.Time
	leaving        bool

	shards   map[int]*shard
	sorder   set[int] // the shards' ids, in a deterministic order
	sessions map[NodeID]*nodeSession
	hints    map[int]HostID // owners learned when an acquisition failed, or a shard moved away
	// notBefore: an acquisition failed with no owner to send nodes to (etcd
	// did not answer, or the owner's session has ended but its key is
	// still there): the shard is not asked for again before then.
	notBefore map[int]time.Time
	expiry    expiryHeap
	// turns are the ends of the turns at leftover units: a holder still
	// keeping one then, while others wait, is nudged to give it up.
	turns    expiryHeap
	outgoing map[int]*outgoing // handoffs sent, until acknowledged
	lastMove time.Time
	// departed are nodes the registry dropped, with when the host may
	// forget them: their leases (all end within a lease of the drop) and
	// the floors this host vouched for must have run out first.
	departed []departure
	// parked are the nodes told to ask again later because the host could
	// not yet answer for a shard (no registry with a host in it, or no
	// confirmed session: a member that has just joined): they are nudged as
	// soon as it can, rather than left to wait out their RetryAfter.
	parked set[NodeID]
	// mine are the shards placed on this host by the registry mineReg.
	mine    []int
	mineReg *Registry

	// Requests counts the entries handled (for the simulation's figures).
	Requests uint64
}

type shardState uint8

const (
	acquiring shardState = iota
	owned
	moving // a Transfer is under way
)

type shard struct {
	id      int
	state   shardState
	epoch   uint64
	ledgers map[string]*Ledger
	// safeUntil: the shard was taken over from an owner whose session ended
	// (it died, or was cut off from etcd, or closed): the leases it granted
	// ended before, but those it was handed with the shard, and the floors
	// vouched for, may run for up to a lease more. Until then no node gets
	// more than it has or uses as its floor (safe mode).
	safeUntil time.Time
	// awaiting: ownership came by a transfer whose handoff has not arrived;
	// safe until it does, or its sender leaves the registry.
	awaiting HostID
	asked    set[NodeID] // nodes told StatusMoving, nudged once owned
}

type nodeSession struct {
	lastSeq uint64
}

type outgoing struct {
	to     HostInfo
	h      Handoff
	nextAt time.Time
}

// NewHost returns a host that owns nothing.
func NewHost(cfg HostConfig, sink HostSink) *Host {
	cfg.fill()
	return &Host{cfg: cfg, sink: sink, regSince: map[HostID]time.Time{}, gone: map[HostID]bool{}, shards: map[int]*shard{},
		sessions: map[NodeID]*nodeSession{}, hints: map[int]HostID{}, notBefore: map[int]time.Time{},
		outgoing: map[int]*outgoing{}}
}

// Config returns the host's configuration with its defaults filled in.
func (h *Host) Config() HostConfig { return h.cfg }

// Confirmed records that the host's session lives at least until until. A
// session other than the one the host had means the old one is gone, with
// every shard bound to it.
func (h *Host) Confirmed(session int64, until time.Time) {
	if session != h.session {
		h.SessionLost()
		h.session = session
	}
	if until.After(h.confirmedUntil) {
		h.confirmedUntil = until
	}
	if h.reg.Hosts() > 0 {
		// A confirmation comes as it is made: the host can answer now (a
		// node that finds it fenced still is parked again).
		h.unpark()
	}
}

// unpark nudges the parked nodes to renew now.
func (h *Host) unpark() {
	for _, n := range h.parked.items {
		h.sink.Nudge(n, Nudge{Host: h.cfg.ID})
	}
	h.parked.clear()
}

// Session returns the session the host's shards are bound to (0: none): a
// coordinator's answer to a call made under another session is stale.
func (h *Host) Session() int64 { return h.session }

// SessionLost records that the host's session expired: every key bound to it
// is gone, so it owns nothing any more (a new session starts over).
func (h *Host) SessionLost() {
	h.session = 0
	h.confirmedUntil = time.Time{}
	for _, id := range slices.Clone(h.sorder.items) {
		h.dropShard(id)
	}
	clear(h.outgoing)
}

func (h *Host) fenced(now time.Time) bool {
	return !now.Before(h.confirmedUntil.Add(-h.cfg.Lease / 10))
}

// SetRegistry takes a new version of the registry: nodes that left are
// forgotten by every ledger once their leases, and the floors this host
// vouched for, have run out (a node whose session expired may still hold
// what its owners granted it); hosts that left lose their hints, and shards
// whose place changed may move (Tick).
func (h *Host) SetRegistry(reg *Registry, now time.Time) {
	old := h.reg
	h.reg = reg
	followHosts(old, reg, h.gone, h.hints)
	if reg.prev == old && old != nil {
		for _, id := range reg.addedHosts {
			h.regSince[id] = now
		}
	} else {
		seen := make(map[HostID]time.Time, reg.Hosts())
		for _, ho := range reg.hosts {
			if t, ok := h.regSince[ho.ID]; ok {
				seen[ho.ID] = t
			} else {
				seen[ho.ID] = now
			}
		}
		h.regSince = seen
	}
	for _, sh := range h.shards {
		if sh.awaiting != "" {
			if _, ok := reg.Host(sh.awaiting); !ok {
				// The sender of the missing handoff is gone: its grants
				// lapse within a lease of its end.
				sh.awaiting = ""
				sh.safeUntil = now.Add(h.cfg.Lease)
			}
		}
	}
	if reg.Hosts() > 0 && !h.fenced(now) {
		h.unpark()
	}
	if old == nil {
		return
	}
	gone, ok := reg.NodesRemovedSince(old)
	if !ok {
		for node := range h.sessions {
			if old.HasNode(node) && !reg.HasNode(node) {
				gone = append(gone, node)
			}
		}
		slices.Sort(gone)
	}
	at := now.Add(h.cfg.Lease)
	for _, node := range gone {
		h.departed = append(h.departed, departure{node: node, at: at})
	}
}

type departure struct {
	node NodeID
	at   time.Time
}

// leasedUntil is when the last live lease of node, or the last floor this
// host vouched for it, ends in the host's ledgers (zero when none). It looks
// at every ledger: nodes leave rarely.
func (h *Host) leasedUntil(node NodeID) time.Time {
	var until time.Time
	for _, s := range h.sorder.items {
		for _, l := range h.shards[s].ledgers {
			ho := l.holders[node]
			if ho == nil {
				continue
			}
			if !ho.lapsed && ho.expires.After(until) {
				until = ho.expires
			}
			if ho.vouched > 0 && ho.vouchEnd.After(until) {
				until = ho.vouchEnd
			}
		}
	}
	return until
}

// forgetNode drops a node that left the registry from every ledger. It
// looks at every ledger the host owns: nodes leave rarely, and a renewal
// then costs no bookkeeping of which routes each node is in.
func (h *Host) forgetNode(node NodeID, now time.Time) {
	delete(h.sessions, node)
	for _, s := range h.sorder.items {
		sh := h.shards[s]
		routes := make([]string, 0, len(sh.ledgers))
		for route, l := range sh.ledgers {
			if l.holders[node] != nil {
				routes = append(routes, route)
			}
		}
		slices.Sort(routes)
		for _, route := range routes {
			l := sh.ledgers[route]
			h.nudge(l.forget(node, now, h.retry()))
			if l.empty() {
				delete(sh.ledgers, route)
			}
		}
	}
}

func (h *Host) retry() time.Duration { return h.cfg.Lease / 8 }

// HandleRenew answers a node's renewal at now.
func (h *Host) HandleRenew(r Renew, now time.Time) RenewReply {
	sess := h.sessions[r.Node]
	if sess == nil {
		sess = &nodeSession{}
		h.sessions[r.Node] = sess
	}
	reply := RenewReply{Host: h.cfg.ID, Seq: r.Seq}
	if r.Seq <= sess.lastSeq {
		reply.Stale = true
		return reply
	}
	sess.lastSeq = r.Seq
	lease := min(h.cfg.Lease, h.confirmedUntil.Sub(now))
	fenced := h.fenced(now)
	reply.Lease = max(lease, 0)
	if fenced {
		reply.Vouch = max(h.confirmedUntil.Add(h.cfg.Lease-h.cfg.Lease/10).Sub(now), 0)
	}
	floor := h.floor(r.Budget, r.FloorCap)
	reply.Grants = make([]Grant, len(r.Entries))
	for i, e := range r.Entries {
		h.Requests++
		s := ShardOf(e.Route, h.cfg.Shards)
		sh := h.shards[s]
		switch {
		case sh == nil:
			reply.Grants[i] = h.notOwned(s, r.Node, now)
		case sh.state != owned:
			sh.asked.add(r.Node)
			reply.Grants[i] = Grant{Status: StatusMoving, Epoch: sh.epoch, RetryAfter: h.cfg.Lease / 30}
		case fenced:
			// Only a node the ledger counts may use a floor: the ledger
			// keeps counting it until the vouch ends.
			g := Grant{Status: StatusFenced, Epoch: sh.epoch}
			if l := sh.ledgers[e.Route]; l != nil && reply.Vouch > 0 {
				g.Floor = l.vouch(r.Node, floor, now.Add(reply.Vouch))
			}
			reply.Grants[i] = g
		default:
			l := sh.ledgers[e.Route]
			if l == nil {
				l = NewLedger(e.Route)
				sh.ledgers[e.Route] = l
			}
			takeover := now.Before(sh.safeUntil)
			g, nudge := l.apply(r.Node, r.Budget, e, applyCtx{now: now, lease: lease, turn: h.cfg.Turn,
				safe: sh.awaiting != "" || takeover, floor: floor, retry: h.retry()})
			g.Epoch = sh.epoch
			if takeover && g.RetryAfter > 0 {
				g.RetryAfter = max(g.RetryAfter, sh.safeUntil.Sub(now))
			}
			reply.Grants[i] = g
			h.nudge(nudge)
			if ho := l.holders[r.Node]; ho != nil {
				heap.Push(&h.expiry, expiryItem{at: now.Add(lease), h: ho, l: l, sh: sh})
				if !ho.turnEnd.IsZero() && !ho.turnEnd.Equal(ho.turnTimer) {
					ho.turnTimer = ho.turnEnd
					heap.Push(&h.turns, expiryItem{at: ho.turnEnd, h: ho, l: l, sh: sh})
				}
				if l.waiting.Len()+l.reserved.Len() > 0 {
					reply.Eager = true
				}
			}
			if l.empty() {
				delete(sh.ledgers, e.Route)
			}
		}
	}
	if r.Release {
		// The node's last renewal: a later one would be from a new node.
		delete(h.sessions, r.Node)
	}
	return reply
}

// floor is the most a node may use once its lease lapses, while the host
// vouches for it: Budget divided by the nodes registered, or the node's
// configured floor, or nothing.
func (h *Host) floor(budget, floorCap int) int {
	switch {
	case floorCap > 0:
		return min(floorCap, budget)
	case floorCap < 0:
		return 0
	}
	if n := h.reg.Nodes(); n > 0 {
		return budget / n
	}
	return 0
}

// notOwned answers an entry of a shard the host does not own: the owner it
// knows of, or, when the shard belongs here by placement, an acquisition.
func (h *Host) notOwned(s int, node NodeID, now time.Time) Grant {
	if owner, ok := h.hints[s]; ok {
		return Grant{Status: StatusNotOwner, Owner: owner}
	}
	place, ok := h.reg.Place(s)
	if h.leaving {
		place, ok = h.reg.PlaceExcept(s, h.cfg.ID)
	}
	switch {
	case !ok:
		h.parked.add(node)
		return Grant{Status: StatusMoving, RetryAfter: h.cfg.Lease / 10}
	case place.ID != h.cfg.ID:
		return Grant{Status: StatusNotOwner, Owner: place.ID}
	case h.fenced(now):
		h.parked.add(node)
		return Grant{Status: StatusMoving, RetryAfter: h.cfg.Lease / 10}
	case now.Before(h.notBefore[s]):
		return Grant{Status: StatusMoving, RetryAfter: h.notBefore[s].Sub(now)}
	}
	sh := h.addShard(s)
	sh.asked.add(node)
	h.sink.Acquire(s)
	return Grant{Status: StatusMoving, RetryAfter: h.cfg.Lease / 30}
}

// Acquired records that the host took shard s at epoch; prev says the shard
// had an owner before, which gave it up by ending its session: the grants it
// made ended before (it grants only what ends before its session could), but
// the leases it was handed with the shard and the floors vouched for may run
// for a lease more without telling this host (safe mode: nobody gets more
// than it has or uses).
func (h *Host) Acquired(s int, epoch uint64, prev bool, now time.Time) {
	delete(h.notBefore, s)
	sh := h.shards[s]
	if sh == nil {
		sh = h.addShard(s)
	}
	sh.state, sh.epoch = owned, epoch
	if prev {
		sh.safeUntil = now.Add(h.cfg.Lease)
	}
	delete(h.hints, s)
	h.nudgeAsked(sh)
}

// OwnedAlready records that an acquisition found the shard already bound to
// this host at epoch, moved here by from whose handoff has not arrived: from
// may have granted leases that still run, so no node gets more than it has
// or uses as its floor until the handoff arrives, or from leaves the
// registry (and a lease more).
func (h *Host) OwnedAlready(s int, epoch uint64, from HostID, now time.Time) {
	h.Acquired(s, epoch, true, now)
	if _, ok := h.reg.Host(from); ok && from != "" {
		h.shards[s].awaiting = from
	}
}

// AcquireFailed records that shard s is owned by owner ("" when the
// coordinator could not be asked). An owner the registry dropped is gone
// (its key stays until its lease ends): the host asks again a little later.
// One the registry never listed is followed: the views differ.
func (h *Host) AcquireFailed(s int, owner HostID, now time.Time) {
	sh := h.shards[s]
	if sh == nil || sh.state != acquiring {
		return
	}
	h.dropShard(s)
	if owner != "" && owner != h.cfg.ID && !h.gone[owner] {
		h.hints[s] = owner
	} else {
		h.notBefore[s] = now.Add(h.cfg.Lease / 6)
	}
	h.nudgeAsked(sh)
}

// Transferred records that shards, asked to move at the epochs asked, now
// belong to to, at epochs: their ledgers go to it in a Handoff, sent again
// until acknowledged. A shard whose epoch is no longer the one asked about
// (the answer came after the session it was asked under was lost, and the
// host took the shard again since) is left alone: the answer is about an
// ownership that ended. It returns how many shards it left so.
func (h *Host) Transferred(shards []int, asked, epochs []uint64, to HostInfo, now time.Time) (stale int) {
	for i, s := range shards {
		sh := h.shards[s]
		if sh == nil {
			continue
		}
		if sh.epoch != asked[i] {
			stale++
			continue
		}
		ho := Handoff{From: h.cfg.ID, Shard: s, Epoch: epochs[i], ToSession: to.Lease}
		for _, l := range sh.ledgers {
			ho.Ledgers = append(ho.Ledgers, l.state(now))
		}
		sort.Slice(ho.Ledgers, func(i, j int) bool { return ho.Ledgers[i].Route < ho.Ledgers[j].Route })
		h.dropShard(s)
		h.hints[s] = to.ID
		h.outgoing[s] = &outgoing{to: to, h: ho, nextAt: now.Add(h.cfg.Lease / 6)}
		h.sink.SendHandoff(to.ID, ho)
	}
	return stale
}

// TransferFailed records that a Transfer of shards, asked at the epochs
// asked, did not happen: lost says the host no longer owns the shards (its
// key was gone), else it owns them still. A shard whose epoch is no longer
// the one asked about is left alone, as by Transferred; it returns how many
// shards it left so.
func (h *Host) TransferFailed(shards []int, asked []uint64, lost bool, now time.Time) (stale int) {
	for i, s := range shards {
		sh := h.shards[s]
		if sh == nil {
			continue
		}
		switch {
		case sh.epoch != asked[i]:
			stale++
		case lost:
			h.dropShard(s)
		case sh.state == moving:
			sh.state = owned
			h.nudgeAsked(sh)
		}
	}
	return stale
}

// ReceiveHandoff installs a shard's ledgers that its previous owner
// transferred here; the transfer made this host the owner at ho.Epoch,
// under its session ho.ToSession (an earlier session's handoff is only
// acknowledged).
func (h *Host) ReceiveHandoff(ho Handoff, now time.Time) {
	h.sink.SendHandoffAck(ho.From, HandoffAck{From: h.cfg.ID, Shard: ho.Shard, Epoch: ho.Epoch})
	if ho.ToSession != h.session || h.session == 0 {
		return // the shard went with the session it was bound to
	}
	sh := h.shards[ho.Shard]
	switch {
	case sh == nil || sh.epoch < ho.Epoch:
		if sh == nil {
			sh = h.addShard(ho.Shard)
		}
		sh.state, sh.epoch, sh.awaiting, sh.safeUntil = owned, ho.Epoch, "", time.Time{}
	case sh.epoch > ho.Epoch:
		return // stale: the shard moved on since
	default:
		sh.awaiting = ""
	}
	delete(h.hints, ho.Shard)
	for _, ls := range ho.Ledgers {
		l := sh.ledgers[ls.Route]
		if l == nil {
			l = NewLedger(ls.Route)
			sh.ledgers[ls.Route] = l
		}
		for _, hd := range l.install(ls, now) {
			heap.Push(&h.expiry, expiryItem{at: hd.expires, h: hd, l: l, sh: sh})
		}
	}
	h.nudgeAsked(sh)
}

// ReceiveHandoffAck stops resending a handoff.
func (h *Host) ReceiveHandoffAck(a HandoffAck) {
	if o := h.outgoing[a.Shard]; o != nil && o.h.Epoch == a.Epoch {
		delete(h.outgoing, a.Shard)
	}
}

func (h *Host) addShard(s int) *shard {
	sh := &shard{id: s, ledgers: map[string]*Ledger{}}
	h.shards[s] = sh
	h.sorder.add(s)
	return sh
}

func (h *Host) dropShard(s int) {
	delete(h.shards, s)
	h.sorder.remove(s)
}

func (h *Host) nudgeAsked(sh *shard) {
	for _, n := range sh.asked.items {
		h.sink.Nudge(n, Nudge{Host: h.cfg.ID})
	}
	sh.asked.clear()
}

func (h *Host) nudge(nodes []NodeID) {
	for _, n := range nodes {
		h.sink.Nudge(n, Nudge{Host: h.cfg.ID})
	}
}

// Tick runs the host's timers at now: leases that lapsed, handoffs to send
// again, and shards to move to the host they belong on.
func (h *Host) Tick(now time.Time) {
	for len(h.departed) > 0 && !h.departed[0].at.After(now) {
		d := h.departed[0]
		h.departed = h.departed[1:]
		if h.reg.HasNode(d.node) {
			continue // back meanwhile
		}
		// A node that left the registry may still renew (it has not heard
		// that its session expired): forget it once its last lease ended.
		if until := h.leasedUntil(d.node); until.After(now) {
			h.departed = append(h.departed, departure{node: d.node, at: until})
			slices.SortStableFunc(h.departed, func(a, b departure) int { return a.at.Compare(b.at) })
			continue
		}
		h.forgetNode(d.node, now)
	}
	for h.expiry.Len() > 0 && !h.expiry[0].at.After(now) {
		it := heap.Pop(&h.expiry).(expiryItem)
		if h.shards[it.sh.id] != it.sh || it.sh.ledgers[it.l.route] != it.l || it.l.holders[it.h.node] != it.h ||
			it.h.lapsed || it.h.expires.After(now) {
			continue // renewed since, or gone
		}
		h.nudge(it.l.lapse(it.h.node, now, h.retry()))
		if it.l.empty() {
			delete(it.sh.ledgers, it.l.route)
		}
	}
	for h.turns.Len() > 0 && !h.turns[0].at.After(now) {
		it := heap.Pop(&h.turns).(expiryItem)
		if h.shards[it.sh.id] != it.sh || it.sh.ledgers[it.l.route] != it.l || it.l.holders[it.h.node] != it.h ||
			!it.h.turnEnd.Equal(it.at) || !it.l.turnOver(it.h, now) {
			continue // gave the unit up since, or nobody waits, or gone
		}
		// Its turn is over: it gives the unit up now rather than at its
		// next renewal, so that the units taken together come free at the
		// moments their staggered turns end.
		it.h.shrinkAt = now
		h.sink.Nudge(it.h.node, Nudge{Host: h.cfg.ID})
	}
	pending := make([]int, 0, len(h.outgoing))
	for s := range h.outgoing {
		pending = append(pending, s)
	}
	slices.Sort(pending)
	for _, s := range pending {
		o := h.outgoing[s]
		if _, ok := h.reg.Host(o.to.ID); !ok {
			delete(h.outgoing, s)
			continue
		}
		if !now.Before(o.nextAt) {
			o.nextAt = now.Add(h.cfg.Lease / 6)
			h.sink.SendHandoff(o.to.ID, o.h)
		}
	}
	if now.Sub(h.lastMove) >= h.cfg.Lease/3 {
		h.lastMove = now
		h.rebalance(now)
	}
}

// maxTransfer bounds the shards of one Transfer (one etcd transaction).
const maxTransfer = 32

// rebalance hands the shards that belong elsewhere (by placement, to a host
// registered for Settle at least) to their place; a leaving host hands them
// all to where they go without it. It also takes the shards that belong here
// and have no owner it knows of, a few at a time, before any node asks: a
// route's first renewal then finds its ledger's owner, with no etcd
// transaction on its way.
func (h *Host) rebalance(now time.Time) {
	if h.fenced(now) || h.reg == nil {
		return
	}
	if !h.leaving {
		if h.mineReg != h.reg {
			h.mineReg, h.mine = h.reg, h.mine[:0]
			for s := range h.cfg.Shards {
				if place, ok := h.reg.Place(s); ok && place.ID == h.cfg.ID {
					h.mine = append(h.mine, s)
				}
			}
		}
		asked := 0
		for _, s := range h.mine {
			if _, hinted := h.hints[s]; h.shards[s] == nil && !hinted && asked < maxTransfer && !now.Before(h.notBefore[s]) {
				h.addShard(s)
				h.sink.Acquire(s)
				asked++
			}
		}
	}
	batches := map[HostID][]int{}
	var dests []HostInfo
	for _, s := range slices.Clone(h.sorder.items) {
		sh := h.shards[s]
		if sh.state != owned || sh.awaiting != "" {
			continue
		}
		place, ok := h.reg.Place(s)
		if h.leaving {
			place, ok = h.reg.PlaceExcept(s, h.cfg.ID)
			if !ok {
				// No other host to take it: it goes with the session, and
				// its next owner starts in safe mode.
				h.dropShard(s)
				continue
			}
		}
		if !ok || place.ID == h.cfg.ID || now.Sub(h.regSince[place.ID]) < h.cfg.Settle && !h.leaving {
			continue
		}
		if _, ok := batches[place.ID]; !ok {
			dests = append(dests, place)
		}
		if len(batches[place.ID]) < maxTransfer {
			batches[place.ID] = append(batches[place.ID], s)
		}
	}
	for _, to := range dests {
		shards := batches[to.ID]
		epochs := make([]uint64, len(shards))
		for i, s := range shards {
			h.shards[s].state = moving
			epochs[i] = h.shards[s].epoch
		}
		h.sink.Transfer(shards, epochs, to)
	}
}

// Leave starts handing every shard to where it goes without this host (a
// graceful stop); Owned reports when it is done. The host acquires nothing
// more.
func (h *Host) Leave(now time.Time) {
	h.leaving = true
	h.lastMove = time.Time{}
	h.Tick(now)
}

// Owned returns how many shards the host owns or is handing over.
func (h *Host) Owned() int { return len(h.shards) }

// Pending returns how many handoffs wait for their acknowledgement.
func (h *Host) Pending() int { return len(h.outgoing) }

// Ledgers returns the ledgers the host owns, by route (tests and the
// simulation read their sums).
func (h *Host) Ledgers(yield func(route string, l *Ledger) bool) {
	for _, sh := range h.shards {
		if sh.state == acquiring {
			continue
		}
		for r, l := range sh.ledgers {
			if !yield(r, l) {
				return
			}
		}
	}
}

type expiryItem struct {
	at time.Time
	h  *holder
	l  *Ledger
	sh *shard
}

type expiryHeap []expiryItem

func (q expiryHeap) Len() int           { return len(q) }
func (q expiryHeap) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q expiryHeap) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *expiryHeap) Push(x any)        { *q = append(*q, x.(expiryItem)) }
func (q *expiryHeap) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}
