package protocol

import (
	"errors"
	"time"
)

// KeeperConfig configures a Keeper. Zero values take the defaults.
type KeeperConfig struct {
	Node   NodeID
	Budget int // the budget per route, > 0
	// Floor bounds the floor: > 0 a fixed floor, 0 Budget / nodes, < 0 none.
	Floor int
	// Lease is the lease the keeper assumes until a host says otherwise
	// (default DefaultLease); it renews every third of it.
	Lease  time.Duration
	Shards int // default DefaultShards; every member must use the same
	// CallTimeout bounds one renewal (default 1s): a renewal unanswered by
	// then counts as failed, and the next one starts after a back-off. The
	// leases held stay valid until they expire.
	CallTimeout time.Duration
	// IdleRelease is how long a route with nothing in use and nobody waiting
	// keeps one block before it gives its whole share back (default Lease).
	IdleRelease time.Duration
	// Block is the step in which a node asks for more: its demand rounded up
	// to whole blocks, plus one (default max(1, Budget/16)).
	Block int
	// MinGap is the least time between two renewals to one host (default
	// 10ms).
	MinGap time.Duration
}

func (c *KeeperConfig) fill() {
	fillShared(&c.Lease, &c.Shards)
	if c.CallTimeout <= 0 {
		c.CallTimeout = time.Second
	}
	if c.IdleRelease <= 0 {
		c.IdleRelease = c.Lease
	}
	if c.Block <= 0 {
		c.Block = max(1, c.Budget/16)
	}
	if c.MinGap <= 0 {
		c.MinGap = 10 * time.Millisecond
	}
}

// ErrTimeout is what a Keeper reports for a renewal abandoned at its
// CallTimeout.
var ErrTimeout = errors.New("renewal not answered in time")

// KeeperSink is what a Keeper asks of its surroundings. Each call must return
// at once.
type KeeperSink interface {
	// Send sends a renewal to a host; its reply comes back through
	// HandleReply, or its failure through HandleFailure.
	Send(to HostID, r Renew)
	// ShareChanged tells the supervisor a route's new share.
	ShareChanged(route string, share, budget int)
	// Renewed reports one renewal's outcome (telemetry): answered (err nil),
	// failed, or abandoned at CallTimeout (ErrTimeout).
	Renewed(host HostID, took time.Duration, err error)
}

// Keeper is one node's side of the fleet budgets: it learns the node's demand
// per route (Usage), renews with each host owning shards of its routes one
// Renew per interval (and sooner when a route needs more, gave some back, or
// the host nudged), and works out each route's share: its grant while the
// lease holds, else its floor when the rules allow, else 0. It is a plain
// value, driven by one goroutine (the keeper actor, or the simulation) and
// given the time with every call.
type Keeper struct {
	cfg  KeeperConfig
	sink KeeperSink

	routes map[string]*kroute
	order  set[*kroute] // the routes, in a deterministic order
	links  map[HostID]*link
	lorder set[*link]
	reg    *Registry
	hints  map[int]HostID // shard owners learned from StatusNotOwner
	// gone are the hosts the registry dropped: a hint to one of them is
	// stale (the host that gave it had not heard yet).
	gone      map[HostID]bool
	releasing bool
	seq       uint64 // the last Renew's sequence number, to any host
	// retarget: the registry or a hint changed; the routes' hosts are
	// worked out again at the next Tick.
	retarget bool

	// Sent counts renewals sent (for the simulation's figures).
	Sent uint64
}

// kroute is the keeper's state for one route.
type kroute struct {
	name  string
	shard int
	host  HostID // where its renewals go now ("" while no host is known)
	// placed is the shard's place in the registry at placedRev.
	placed    HostID
	placedRev int64
	gone      bool // forgotten; a renewal in flight may still name it

	// Demand, from the last Usage.
	held, idle, waiting int
	lastUsed            time.Time
	peak                int // the highest want since the last renewal began
	peakNeed            int // the highest need since the last renewal began

	// The lease, from the last StatusOK grant.
	grant      int
	leaseUntil time.Time // node-side end, a margin before the host's
	budget     int       // as the ledger divides it (0 until answered)
	nodes      int
	safe       bool
	owner      HostID // the host that granted last
	// known: the owner keeps a place for the node (it counts its floor once
	// the lease lapses); set by grants that left one, cleared by one that
	// did not.
	known bool
	// vouchUntil: a fenced owner vouches for vouched (the node's floor, as
	// its ledger counts it) until then.
	vouchUntil time.Time
	vouched    int
	fresh      bool      // its current host has not answered it yet
	retryAt    time.Time // when to ask again for more, as the host said (zero: wait to be nudged)
	sentHas    int       // what the latest renewal reported: the ledger counts
	sentHeld   int       // at least max(grant, sentHas, sentHeld) until the next
	sentWant   int
	sentNeed   int
	told       int // what the supervisor was last told (ShareChanged)
	released   bool
}

// link is the keeper's exchange with one host.
type link struct {
	host      HostID
	routes    set[*kroute]
	seq       uint64
	inFlight  bool
	sentAt    time.Time
	lastSent  time.Time
	sent      []*kroute // the entries of the latest renewal, in order
	failed    bool
	streak    int
	next      time.Time // after a failure, the earliest next renewal
	nudged    bool
	eagerTill time.Time // the host said nodes wait: give back promptly
	// check: something changed that may make a renewal due; else Tick looks
	// at the link again only at wake (a Tick costs O(links), not O(routes)).
	check bool
	wake  time.Time

	lastTook          time.Duration
	renewed, failures int
}

// NewKeeper returns a keeper that holds no share.
func NewKeeper(cfg KeeperConfig, sink KeeperSink) *Keeper {
	cfg.fill()
	return &Keeper{cfg: cfg, sink: sink, routes: map[string]*kroute{}, links: map[HostID]*link{}, hints: map[int]HostID{},
		gone: map[HostID]bool{}}
}

// Config returns the keeper's configuration with its defaults filled in.
func (k *Keeper) Config() KeeperConfig { return k.cfg }

// Usage records a route's demand: held connections (open and dialing), the
// idle part of them, and callers waiting.
func (k *Keeper) Usage(route string, held, idle, waiting int, now time.Time) {
	if k.releasing || route == "" {
		return
	}
	r := k.routes[route]
	if r == nil {
		r = &kroute{name: route, shard: ShardOf(route, k.cfg.Shards), lastUsed: now, fresh: true}
		k.routes[route] = r
		k.order.add(r)
		k.move(r, k.target(r))
	}
	if l := k.links[r.host]; l != nil {
		l.check = true
	}
	r.held, r.idle, r.waiting = max(held, 0), min(max(idle, 0), max(held, 0)), max(waiting, 0)
	if r.held-r.idle+r.waiting > 0 {
		r.lastUsed = now
	}
	r.peak = max(r.peak, k.want(r, now))
	r.peakNeed = max(r.peakNeed, r.need())
}

// need is the route's demand: connections in use plus callers waiting.
func (r *kroute) need() int {
	if r.released {
		return 0
	}
	return max(r.held-r.idle+r.waiting, 0)
}

// SessionLost records that this member's session expired: its nodes left
// the registry, so every owner will forget them; no floor may be used until
// an owner keeps a place for the node again.
func (k *Keeper) SessionLost() {
	for _, r := range k.order.items {
		r.known = false
	}
}

// Unreachable records that a renewal to host could not be delivered (the
// cluster answered that nothing lives at its address).
func (k *Keeper) Unreachable(host HostID, now time.Time) {
	if l := k.links[host]; l != nil {
		k.HandleFailure(host, l.seq, ErrUnreachable, now)
	}
}

// ErrUnreachable is what a Keeper reports for a renewal to a host that the
// cluster could not deliver.
var ErrUnreachable = errors.New("ledger host unreachable")

// InFlight returns how many renewals are unanswered (Release waits for its
// last ones).
func (k *Keeper) InFlight() int {
	n := 0
	for _, l := range k.lorder.items {
		if l.inFlight {
			n++
		}
	}
	return n
}

// SetRegistry takes a new version of the registry.
func (k *Keeper) SetRegistry(reg *Registry, now time.Time) {
	followHosts(k.reg, reg, k.gone, k.hints)
	k.reg = reg
	k.retarget = true
}

// Nudged records a host's Nudge: renew with it now.
func (k *Keeper) Nudged(host HostID) {
	if l := k.links[host]; l != nil {
		l.nudged, l.check = true, true
	}
}

// want is the share to ask for: the connections in use plus the callers
// waiting, plus headroom, rounded up to whole blocks, so that a busy node asks
// now and then for a block rather than for every connection. A route idle
// for IdleRelease wants nothing (it gives its share back); until then one
// block.
func (k *Keeper) want(r *kroute, now time.Time) int {
	if r.released {
		return 0
	}
	used := r.held - r.idle + r.waiting
	if used <= 0 {
		if now.Sub(r.lastUsed) < k.cfg.IdleRelease {
			return min(k.cfg.Block, k.cfg.Budget)
		}
		return 0
	}
	return min(k.cfg.Budget, (used/k.cfg.Block+1)*k.cfg.Block)
}

// has is the grant the node enforces at now: 0 once the lease has expired.
func (r *kroute) has(now time.Time) int {
	if !r.released && now.Before(r.leaseUntil) {
		return r.grant
	}
	return 0
}

// floorNow is the floor the node may use at now on r, 0 when the rules do
// not allow one: only while the route's owner vouches for it (the owner
// answered the node's last renewal, but could not confirm its own session
// with etcd: its ledger counts the node at that floor until the vouch ends,
// which is before anyone can have taken its shards over and left safe mode).
func (k *Keeper) floorNow(r *kroute, now time.Time) int {
	f := r.vouched
	switch {
	case k.cfg.Floor < 0:
		return 0
	case k.cfg.Floor > 0:
		f = min(f, k.cfg.Floor)
	}
	if f <= 0 || !r.known || r.released || !now.Before(r.vouchUntil) {
		return 0
	}
	return f
}

// share is what the node may hold on r at now, and whether it is the floor.
func (k *Keeper) share(r *kroute, now time.Time) (int, bool) {
	if now.Before(r.leaseUntil) {
		return r.grant, false
	}
	if f := k.floorNow(r, now); f > 0 {
		return f, true
	}
	return 0, false
}

// ledgerCounts is what the ledger counts for the node on r since its latest
// renewal.
func (r *kroute) ledgerCounts() int { return max(r.grant, r.sentHas, r.sentHeld) }

// target is the host r's renewals go to: the owner a host named, else the
// shard's place in the registry.
func (k *Keeper) target(r *kroute) HostID {
	if len(k.hints) > 0 {
		if h, ok := k.hints[r.shard]; ok {
			return h
		}
	}
	if rev := k.reg.Revision(); r.placedRev != rev || rev == 0 {
		r.placed, r.placedRev = "", rev
		if p, ok := k.reg.Place(r.shard); ok {
			r.placed = p.ID
		}
	}
	return r.placed
}

// Tick runs the keeper's timers at now: renewals due, overdue ones given up,
// shares changed, routes forgotten.
func (k *Keeper) Tick(now time.Time) {
	if k.retarget {
		k.retarget = false
		for _, r := range k.order.items {
			if t := k.target(r); t != r.host {
				k.move(r, t)
			}
		}
	}
	for i := 0; i < k.lorder.len(); i++ {
		l := k.lorder.items[i]
		if l.inFlight && now.Sub(l.sentAt) >= k.cfg.CallTimeout {
			l.inFlight = false
			k.fail(l, now)
			k.sink.Renewed(l.host, now.Sub(l.sentAt), ErrTimeout)
			l.check = true
		}
		if !k.releasing && (l.check || !now.Before(l.wake)) && k.due(l, now) {
			k.send(l, now)
		}
		if l.routes.len() == 0 && !l.inFlight {
			delete(k.links, l.host)
			k.lorder.remove(l)
			i--
		}
	}
	if k.releasing {
		return
	}
	for i := 0; i < k.order.len(); i++ {
		r := k.order.items[i]
		k.tell(r, now)
		if k.forgettable(r, now) {
			k.forget(r)
			i--
		}
	}
}

func (k *Keeper) tell(r *kroute, now time.Time) {
	share, _ := k.share(r, now)
	if share != r.told {
		r.told = share
		k.sink.ShareChanged(r.name, share, k.budgetOf(r))
	}
}

func (k *Keeper) budgetOf(r *kroute) int {
	if r.budget > 0 {
		return r.budget
	}
	return k.cfg.Budget
}

// move sends r's renewals to host t from now on.
func (k *Keeper) move(r *kroute, t HostID) {
	if l := k.links[r.host]; l != nil {
		l.routes.remove(r)
	}
	r.host, r.fresh = t, true
	if t == "" {
		return
	}
	l := k.links[t]
	if l == nil {
		l = &link{host: t}
		k.links[t] = l
		k.lorder.add(l)
	}
	l.routes.add(r)
	l.check = true
}

// due says whether a renewal to l's host should start at now. When it is
// not, it sets l.wake to the earliest time one could be without a new event.
func (k *Keeper) due(l *link, now time.Time) bool {
	l.check = false
	wake := func(t time.Time) {
		if l.wake.IsZero() || t.Before(l.wake) {
			l.wake = t
		}
	}
	l.wake = now.Add(k.cfg.Lease / 3)
	switch {
	case l.routes.len() == 0:
		return false
	case l.inFlight:
		wake(l.sentAt.Add(k.cfg.CallTimeout))
		return false
	case l.failed && now.Before(l.next):
		wake(l.next)
		return false
	case l.nudged:
		return true // the host rate-limits its nudges
	case now.Sub(l.lastSent) < k.cfg.MinGap:
		wake(l.lastSent.Add(k.cfg.MinGap))
		l.check = true
		return false
	}
	renewAt := l.lastSent.Add(k.cfg.Lease / 3)
	spareAt := l.lastSent.Add(k.cfg.Lease / 6)
	eager := now.Before(l.eagerTill)
	for _, r := range l.routes.items {
		has := r.has(now)
		if r.peak > 0 || r.held > 0 || has > 0 || r.ledgerCounts() > 0 || r.known {
			if !now.Before(renewAt) {
				return true // renewal
			}
			wake(renewAt)
		}
		if r.fresh && r.peak > 0 {
			if !now.Before(r.retryAt) {
				return true // a new route, or one its host has not answered yet
			}
			wake(r.retryAt)
		}
		if r.peakNeed > r.grant {
			if r.peakNeed > r.sentNeed {
				return true // needs more than the host knows
			}
			if !r.retryAt.IsZero() {
				if !now.Before(r.retryAt) {
					return true // the host said asking again could get more
				}
				wake(r.retryAt)
			}
		}
		if eager && r.ledgerCounts() > max(has, r.held) {
			return true // gave back what others wait for
		}
		if r.peak+k.cfg.Block <= r.grant {
			if !now.Before(spareAt) {
				return true // a block or more to spare
			}
			wake(spareAt)
		}
	}
	return false
}

// NextWake returns the earliest time at which a Tick could start a renewal
// without a new event (a renewal's MinGap ending, a host's RetryAfter, a
// failure's back-off, a renewal due, an unanswered one to give up), zero
// when there is none. A driver that ticks coarsely calls Tick again then, so
// that a renewal held back by MinGap or RetryAfter leaves when it may, not at
// the driver's next tick.
func (k *Keeper) NextWake() time.Time {
	if k.releasing {
		return time.Time{}
	}
	var next time.Time
	for _, l := range k.lorder.items {
		w := l.wake
		if l.inFlight {
			w = l.sentAt.Add(k.cfg.CallTimeout)
		} else if l.routes.len() == 0 {
			continue
		}
		if !w.IsZero() && (next.IsZero() || w.Before(next)) {
			next = w
		}
	}
	return next
}

// send starts a renewal of every route of l's host.
func (k *Keeper) send(l *link, now time.Time) {
	// One counter for every host: a link that is dropped and made again
	// must not start over at a number its host already answered.
	k.seq++
	l.seq = k.seq
	l.inFlight, l.sentAt, l.lastSent, l.nudged = true, now, now, false
	l.sent = l.sent[:0]
	req := Renew{Node: k.cfg.Node, Seq: l.seq, Budget: k.cfg.Budget, FloorCap: k.cfg.Floor, Release: k.releasing,
		Entries: make([]Entry, 0, l.routes.len())}
	for _, r := range l.routes.items {
		e := Entry{Route: r.name, Has: r.has(now), Held: r.held, Need: max(r.peakNeed, r.need()), Want: max(r.peak, k.want(r, now))}
		if share, onFloor := k.share(r, now); onFloor {
			e.OnFloor = share
		}
		if r.released {
			e.Need, e.Want, e.Has, e.OnFloor = 0, 0, 0, 0
		}
		r.sentHas, r.sentHeld, r.sentWant, r.sentNeed = e.Has, e.Held, e.Want, e.Need
		r.peak, r.peakNeed = k.want(r, now), r.need()
		r.retryAt = time.Time{}
		req.Entries = append(req.Entries, e)
		l.sent = append(l.sent, r)
	}
	k.Sent++
	k.sink.Send(l.host, req)
}

func (k *Keeper) fail(l *link, now time.Time) {
	l.failed = true
	l.streak++
	l.failures++
	l.next = now.Add(min(100*time.Millisecond<<min(l.streak-1, 5), k.cfg.Lease/3))
}

// HandleReply applies a host's answer to the keeper's latest renewal to it
// (an answer to an older one is dropped: the host may have been overtaken
// since, so applying it could make the node use more than the ledger counts).
func (k *Keeper) HandleReply(rep RenewReply, now time.Time) {
	l := k.links[rep.Host]
	if l == nil || rep.Seq != l.seq || rep.Stale || len(rep.Grants) != len(l.sent) {
		return
	}
	wasInFlight := l.inFlight
	l.inFlight, l.failed, l.streak, l.check = false, false, 0, true
	l.renewed++
	l.lastTook = now.Sub(l.sentAt)
	if wasInFlight {
		k.sink.Renewed(l.host, l.lastTook, nil)
	}
	if rep.Eager {
		l.eagerTill = now.Add(k.cfg.Lease / 3)
	}
	lease := rep.Lease - k.cfg.Lease/10 // a margin for the tick and clocks that drift apart
	for i, g := range rep.Grants {
		r := l.sent[i]
		if r.gone {
			continue
		}
		switch g.Status {
		case StatusOK:
			r.grant, r.budget, r.nodes, r.safe = g.Grant, g.Budget, g.Nodes, g.Safe
			r.leaseUntil = time.Time{}
			if lease > 0 {
				r.leaseUntil = l.sentAt.Add(lease)
			}
			r.known = r.sentWant > 0 || r.sentHas > 0 || r.sentHeld > 0 || g.Grant > 0
			r.owner, r.vouchUntil, r.vouched = rep.Host, time.Time{}, 0
			r.fresh = false
			r.retryAt = time.Time{}
			if g.RetryAfter > 0 {
				r.retryAt = now.Add(g.RetryAfter)
			}
		case StatusNotOwner:
			// A hint to a host the registry dropped is stale (the answering
			// host had not heard yet): placement decides. One to a host the
			// registry never listed is followed: the views differ.
			if g.Owner != "" && g.Owner != rep.Host && !k.gone[g.Owner] {
				k.hints[r.shard] = g.Owner
			} else {
				delete(k.hints, r.shard)
				r.retryAt = now.Add(k.cfg.Lease / 10) // not at once: the placement may still be stale
				k.retarget = true
				continue
			}
			r.retryAt = time.Time{}
			k.retarget = true
		case StatusMoving:
			r.retryAt = now.Add(g.RetryAfter)
		case StatusFenced:
			// Counted from when the renewal left: the host's vouch ran
			// from when it answered, later.
			r.vouchUntil, r.vouched = l.sentAt.Add(rep.Vouch), g.Floor
		}
	}
}

// HandleFailure records that the renewal seq to host failed (the cluster
// could not deliver it, or the host is gone).
func (k *Keeper) HandleFailure(host HostID, seq uint64, err error, now time.Time) {
	l := k.links[host]
	if l == nil || seq != l.seq || !l.inFlight {
		return
	}
	l.inFlight, l.check = false, true
	k.fail(l, now)
	k.sink.Renewed(host, now.Sub(l.sentAt), err)
}

// forgettable says whether the keeper can drop r: nothing held, used or
// wanted, no lease, and no place kept for the node by the owner.
func (k *Keeper) forgettable(r *kroute, now time.Time) bool {
	return r.held == 0 && r.waiting == 0 && k.want(r, now) == 0 && r.has(now) == 0 && !r.known && r.told == 0
}

func (k *Keeper) forget(r *kroute) {
	if l := k.links[r.host]; l != nil {
		l.routes.remove(r)
	}
	r.gone = true
	delete(k.routes, r.name)
	k.order.remove(r)
}

// SharesRequest tells the supervisor again every share that is not 0.
func (k *Keeper) SharesRequest() {
	if k.releasing {
		return
	}
	for _, r := range k.order.items {
		if r.told != 0 {
			k.sink.ShareChanged(r.name, r.told, k.budgetOf(r))
		}
	}
}

// Release gives every share back: a last renewal to each host that wants
// and has nothing (it still reports what it holds). The keeper sends nothing
// after these and tells the supervisor nothing more.
func (k *Keeper) Release(now time.Time) {
	if k.releasing {
		return
	}
	for _, r := range k.order.items {
		r.released = true
		r.peak, r.peakNeed = 0, 0
		if t := k.target(r); t != r.host {
			k.move(r, t)
		}
	}
	k.releasing = true
	for _, l := range k.lorder.items {
		if l.routes.len() > 0 {
			l.inFlight = false
			k.send(l, now)
		}
	}
}

// RouteState is one route in a Snapshot.
type RouteState struct {
	Route               string
	Share               int
	OnFloor             bool
	Budget              int
	Grant               int
	LeaseLeft           time.Duration
	Safe                bool
	Nodes               int
	Held, Idle, Waiting int
	Host                HostID
	LastRenewal         time.Duration // of the route's host
	Renewals, Failures  int
}

// Snapshot returns the keeper's view of its routes at now.
func (k *Keeper) Snapshot(now time.Time) (members int, routes []RouteState) {
	for _, r := range k.order.items {
		share, onFloor := k.share(r, now)
		s := RouteState{Route: r.name, Share: share, OnFloor: onFloor, Budget: k.budgetOf(r), Grant: r.grant,
			LeaseLeft: max(r.leaseUntil.Sub(now), 0), Safe: r.safe, Nodes: r.nodes,
			Held: r.held, Idle: r.idle, Waiting: r.waiting, Host: r.host}
		if l := k.links[r.host]; l != nil {
			s.LastRenewal, s.Renewals, s.Failures = l.lastTook, l.renewed, l.failures
		}
		routes = append(routes, s)
	}
	return k.reg.Nodes(), routes
}

// Share returns a route's share at now (the simulation's pools read it).
func (k *Keeper) Share(route string, now time.Time) int {
	if r := k.routes[route]; r != nil {
		s, _ := k.share(r, now)
		return s
	}
	return 0
}

// Routes returns how many routes the keeper keeps.
func (k *Keeper) Routes() int { return len(k.routes) }
