package protocol

import (
	"container/heap"
	"container/list"
	"fmt"
	"sort"
	"time"
)

// Ledger is one route's budget as its shard's owner keeps it: the leases
// granted to nodes. It is a plain value, touched only by its Host.
//
// The rule it keeps: the sum over holders of their commitment never exceeds
// the budget once safe mode is over. A live holder's commitment is
// max(grant, has, held, onFloor, vouched): what the ledger last granted, what
// the node said it enforces, what it holds, the floor it uses, the floor a
// fenced owner vouched for. A node grows only to its grant and drops below has
// only once it got the smaller grant, which its next renewal confirms; so a
// reply that is lost or late can only make the ledger count too much. A lapsed
// holder (its lease ran out before it renewed) may be on its floor, which is
// never more than it was counted for: it counts
// max(min(floor, max(grant, has, onFloor)), held, vouched) until it renews,
// or leaves the registry. A budget that shrinks (a configuration lowered:
// the ledger divides the smallest budget its live holders ask for) leaves the
// sum above it until the holders confirm their smaller grants: meanwhile
// Committed says so, and no holder is granted a unit it does not have.
//
// Division is max-min fair by need (wants): holders needing the level or less
// get their need, the others the level, and the units left over go one a
// holder above the level; budget no need asks for is headroom, shared up to
// the wants. Holders granted less than they could hope for wait in a queue,
// first come first served; a unit that comes free is reserved for the
// longest-waiting holder, which is nudged to renew and take it, and a holder
// that keeps a leftover unit gives it up after a turn while others wait (its
// host nudges it when the turn ends). The turns are staggered, one to two
// turns long, so that units taken together do not all change hands together.
// So when the budget is smaller than the nodes that want it, the units
// rotate, and every node gets one within a bounded time. Every operation is O(log W)
// in the largest need, plus O(1) per node nudged: nothing re-sorts the
// holders.
type Ledger struct {
	route   string
	holders map[NodeID]*holder
	// committed is the sum of the holders' counted commitments.
	committed int
	wants     wants
	// budgets counts the live holders' budgets; the ledger divides the
	// smallest. last is the budget when no holder is live.
	budgets map[int]int
	last    int
	live    int
	// waiting lists the live holders granted less than they could hope
	// for, the longest-waiting first; reserved those of them for whom a free
	// unit is kept, nudged to come and take it (until their reservation
	// expires). A holder that is in neither takes a free unit only beyond
	// the reserved ones.
	waiting, reserved list.List
	// big orders the holders by commitment, the largest first: when a
	// renewal is short because others hold more than their fair part, the
	// largest are nudged to renew and get their smaller grants.
	big bigHeap
	// turns counts the leftover units taken: it staggers their turns.
	turns uint64
}

type holder struct {
	node                           NodeID
	budget                         int
	has, held, need, want, onFloor int
	grant                          int
	floor                          int // what the holder may use once its lease lapses
	lapsed                         bool
	expires                        time.Time
	extraSince                     time.Time     // when it got a unit above the level (zero: none)
	turnEnd                        time.Time     // when its turn at that unit ends
	turnTimer                      time.Time     // the turnEnd its host keeps a timer for
	wait                           *list.Element // in Ledger.waiting or Ledger.reserved, or nil
	isReserved                     bool          // wait is in Ledger.reserved
	reservedUntil                  time.Time
	counted                        int // its commitment as summed in Ledger.committed
	bigIdx                         int // its place in Ledger.big (-1: none)
	shrinkAt                       time.Time
	nudgedAt                       time.Time // last nudged to take a free unit
	// vouched is the floor a fenced owner vouched for until vouchEnd: the
	// node may use it without renewing, so the ledger counts it until then.
	vouched  int
	vouchEnd time.Time
}

func (h *holder) commitment() int {
	if h.lapsed {
		// A lapsed node uses at most its floor, and never more than it was
		// counted for (so lapsing frees budget, never takes more).
		return max(min(h.floor, max(h.grant, h.has, h.onFloor)), h.held, h.vouched)
	}
	return max(h.grant, h.has, h.held, h.onFloor, h.vouched)
}

// endVouch forgets a vouch that ended by now (the caller recounts h).
func (h *holder) endVouch(now time.Time) {
	if h.vouched > 0 && !now.Before(h.vouchEnd) {
		h.vouched, h.vouchEnd = 0, time.Time{}
	}
}

// NewLedger returns the empty ledger of route.
func NewLedger(route string) *Ledger {
	return &Ledger{route: route, holders: map[NodeID]*holder{}, budgets: map[int]int{}}
}

// applyCtx is what the host tells the ledger about one renewal.
type applyCtx struct {
	now   time.Time
	lease time.Duration // the lease the reply grants
	turn  time.Duration // how long a leftover unit is kept while others wait
	safe  bool          // the shard is in safe mode: no grant above has or onFloor
	floor int           // the floor the node may use once its lease lapses
	retry time.Duration // RetryAfter for a node granted less than it wants
}

// apply records a node's renewal of this route and grants it its share. It
// returns the grant and the nodes worth nudging (budget freed for them).
func (l *Ledger) apply(node NodeID, budget int, e Entry, c applyCtx) (Grant, []NodeID) {
	h := l.holders[node]
	if h == nil {
		h = &holder{node: node, bigIdx: -1}
		l.holders[node] = h
		heap.Push(&l.big, h)
	}
	l.unlink(h)
	h.endVouch(c.now)
	h.budget, h.has, h.held, h.onFloor = budget, max(e.Has, 0), max(e.Held, 0), max(e.OnFloor, 0)
	h.need = min(max(e.Need, 0), budget)
	h.want = min(max(e.Want, h.need), budget)
	h.lapsed, h.expires, h.floor = false, c.now.Add(c.lease), c.floor
	l.budgets[budget]++
	l.live++
	l.wants.add(h.need, 1)

	b := l.budget()
	level, leftover, capped := l.wants.level(b)
	l.expireReservations(c.now)
	wasReserved := h.isReserved
	// The holders that wait or hold a reservation, but h: units free beyond
	// them may go to a holder that comes first.
	queued := l.waiting.Len() + l.reserved.Len()
	if h.wait != nil {
		queued--
	}
	// fair is what the holder can hope for now: its need, or the level and,
	// while units are left over, one of them. target is what it gets if the
	// budget allows: when the needs fit, its need and an even part of the
	// budget they leave as headroom; else a leftover unit only when it keeps
	// one it had for less than a turn (or nobody waits), or a free one is
	// reserved for it, or free units outnumber the holders reserved and
	// waiting (first come, first served: a holder that just gave its unit up
	// queues behind the others).
	fair := h.need
	target := h.need + min(h.want-h.need, leftover/max(l.live, 1))
	if capped {
		target, fair = min(h.need, level), min(h.need, level)
		if h.need > level && leftover > 0 {
			fair = level + 1
			keep := !h.extraSince.IsZero() && (c.now.Before(h.turnEnd) || queued == 0)
			take := h.extraSince.IsZero() && (wasReserved || b-l.committed-min(h.need, level) > queued)
			if keep || take {
				target = level + 1
			}
		}
	}
	grant := max(0, min(target, b-l.committed))
	if c.safe {
		grant = min(grant, max(h.has, h.onFloor))
	}
	h.grant = grant
	if capped && grant > level {
		if h.extraSince.IsZero() {
			h.extraSince, h.turnEnd = c.now, c.now.Add(c.turn+l.stagger(c.turn))
		}
	} else {
		h.extraSince, h.turnEnd = time.Time{}, time.Time{}
	}
	if wasReserved {
		// It came for the unit kept for it (whether it got it or another
		// took it first): a unit that comes free later is worth nudging it
		// for again, before its RetryAfter.
		h.nudgedAt = time.Time{}
	}
	switch {
	case grant >= fair:
		l.unwait(h)
	case wasReserved:
		l.unwait(h)
		h.wait = l.waiting.PushFront(h) // the unit went elsewhere: it keeps its place
	case h.wait == nil:
		h.wait = l.waiting.PushBack(h)
	}
	l.link(h)

	g := Grant{Status: StatusOK, Grant: grant, Budget: b, Floor: c.floor, Safe: c.safe, Nodes: l.live}
	if grant < target {
		// Others hold what would be this node's: they give it back at their
		// next renewal. (A node waiting for its turn at a leftover unit
		// needs no retry: it is nudged when one is free.)
		g.RetryAfter = c.retry
	}
	if h.want == 0 && h.counted == 0 {
		l.remove(h) // nothing held, nothing wanted: forget the node
	}
	var nudge []NodeID
	if !g.Safe { // in safe mode free units cannot be granted: nobody to nudge
		nudge = l.nudgeWaiting(c.now, c.retry)
	}
	if grant < target && !g.Safe {
		nudge = append(nudge, l.nudgeShrink(target-grant, max(level, 1), h, c)...)
	}
	return g, nudge
}

// stagger is how much longer than a turn the next leftover unit taken is
// kept: spread evenly over [0, turn) along a golden-ratio sequence, so that
// units taken together (every node asks at once after a change of demand)
// come free at different moments, not in waves of handovers that leave the
// budget part idle at once, turn after turn.
func (l *Ledger) stagger(turn time.Duration) time.Duration {
	l.turns++
	frac := float64(l.turns*0x9e3779b97f4a7c15>>11) / (1 << 53)
	return time.Duration(frac * float64(turn))
}

// turnOver reports whether h keeps a leftover unit whose turn has ended
// while others wait for one: it is worth nudging to renew and give it up.
func (l *Ledger) turnOver(h *holder, now time.Time) bool {
	return !h.lapsed && !h.extraSince.IsZero() && !now.Before(h.turnEnd) && l.waiting.Len()+l.reserved.Len() > 0
}

// maxShrinkNudges bounds the holders one renewal nudges to shrink.
const maxShrinkNudges = 8

// nudgeShrink returns the largest holders above the level (live, not except,
// not nudged within the retry gap), until their excess covers short: they
// renew at once and get their smaller grants. O(k log n) for k nudged.
func (l *Ledger) nudgeShrink(short, level int, except *holder, c applyCtx) []NodeID {
	var out []NodeID
	var popped []*holder
	for l.big.Len() > 0 && short > 0 && len(popped) < 2*maxShrinkNudges {
		h := heap.Pop(&l.big).(*holder)
		popped = append(popped, h)
		excess := h.counted - level
		if excess <= 0 {
			break
		}
		if h == except || h.lapsed || c.now.Sub(h.shrinkAt) < c.retry {
			continue
		}
		h.shrinkAt = c.now
		out = append(out, h.node)
		short -= excess
		if len(out) == maxShrinkNudges {
			break
		}
	}
	for _, h := range popped {
		heap.Push(&l.big, h)
	}
	return out
}

// expireReservations gives up the reservations of holders that did not come
// within their time (a nudge lost, or a node gone): they wait again, at the
// head.
func (l *Ledger) expireReservations(now time.Time) {
	for e := l.reserved.Front(); e != nil; e = l.reserved.Front() {
		h := e.Value.(*holder)
		if now.Before(h.reservedUntil) {
			return
		}
		l.reserved.Remove(e)
		h.isReserved = false
		h.wait = l.waiting.PushFront(h)
	}
}

// unwait takes h out of the waiting or reserved queue.
func (l *Ledger) unwait(h *holder) {
	if h.wait == nil {
		return
	}
	if h.isReserved {
		l.reserved.Remove(h.wait)
	} else {
		l.waiting.Remove(h.wait)
	}
	h.wait, h.isReserved = nil, false
}

// nudgeWaiting reserves the units free beyond the reservations for the
// longest-waiting holders, and returns them: they are nudged to renew.
// A holder nudged within gap is passed over while it has yet to come:
// nudges never chase each other. Once it has come (apply clears its
// nudgedAt), whether it got its unit or another took it first, it may be
// nudged for the next unit that comes free.
func (l *Ledger) nudgeWaiting(now time.Time, gap time.Duration) []NodeID {
	free := l.budget() - l.committed
	var out []NodeID
	e := l.waiting.Front()
	for skipped := 0; l.reserved.Len() < free && e != nil && skipped < maxShrinkNudges; {
		h, next := e.Value.(*holder), e.Next()
		if now.Sub(h.nudgedAt) < gap {
			skipped++
			e = next
			continue
		}
		l.waiting.Remove(e)
		h.isReserved, h.reservedUntil, h.nudgedAt = true, now.Add(gap), now
		h.wait = l.reserved.PushBack(h)
		out = append(out, h.node)
		e = next
	}
	return out
}

// unlink takes h's share out of the sums (its commitment, want, budget and
// place in the waiting list stay on h).
func (l *Ledger) unlink(h *holder) {
	l.committed -= h.counted
	h.counted = 0
	if h.bigIdx >= 0 {
		heap.Fix(&l.big, h.bigIdx)
	}
	if !h.lapsed && h.budget > 0 {
		if l.budgets[h.budget]--; l.budgets[h.budget] == 0 {
			delete(l.budgets, h.budget)
		}
		l.live--
		l.wants.add(h.need, -1)
	}
}

// link puts h's commitment back into the sum (its want and budget are added
// by the caller for a live holder).
func (l *Ledger) link(h *holder) {
	h.counted = h.commitment()
	l.committed += h.counted
	if h.bigIdx >= 0 {
		heap.Fix(&l.big, h.bigIdx)
	}
}

func (l *Ledger) remove(h *holder) {
	l.unlink(h)
	l.unwait(h)
	if h.bigIdx >= 0 {
		heap.Remove(&l.big, h.bigIdx)
	}
	h.budget = 0
	delete(l.holders, h.node)
}

// lapse marks node's lease as run out (it did not renew in time): from now on
// it may be on its floor, and counts as max(floor, held). It returns the
// nodes worth nudging when that frees budget.
func (l *Ledger) lapse(node NodeID, now time.Time, gap time.Duration) []NodeID {
	h := l.holders[node]
	if h == nil || h.lapsed {
		return nil
	}
	l.unlink(h)
	l.unwait(h)
	h.lapsed, h.extraSince, h.turnEnd = true, time.Time{}, time.Time{}
	h.endVouch(now)
	l.link(h)
	if h.counted == 0 {
		l.remove(h)
	}
	l.expireReservations(now)
	return l.nudgeWaiting(now, gap)
}

// vouch records that a fenced host vouches for node's floor until end: the
// node may use, without renewing, up to floor but never more than the ledger
// counts for it now, and the ledger keeps counting that much until end. It
// returns the floor vouched for (0 for a node the ledger does not know).
func (l *Ledger) vouch(node NodeID, floor int, end time.Time) int {
	h := l.holders[node]
	if h == nil {
		return 0
	}
	v := min(floor, h.counted)
	if v <= 0 {
		return 0
	}
	h.vouched = max(h.vouched, v)
	if end.After(h.vouchEnd) {
		h.vouchEnd = end
	}
	l.committed -= h.counted
	l.link(h)
	return v
}

// forget drops node (it left the registry, or released): it holds nothing
// the ledger need count.
func (l *Ledger) forget(node NodeID, now time.Time, gap time.Duration) []NodeID {
	h := l.holders[node]
	if h == nil {
		return nil
	}
	l.remove(h)
	l.expireReservations(now)
	return l.nudgeWaiting(now, gap)
}

// budget is the smallest budget a live holder asked for (nodes that disagree,
// during a rolling change of configuration, get the stricter one).
func (l *Ledger) budget() int {
	b := -1
	for v := range l.budgets {
		if b < 0 || v < b {
			b = v
		}
	}
	if b < 0 {
		return l.last
	}
	l.last = b
	return b
}

// empty reports whether the ledger has no holder left.
func (l *Ledger) empty() bool { return len(l.holders) == 0 }

// Committed returns the sum of the holders' commitments (for tests and the
// simulation's checks).
func (l *Ledger) Committed() int { return l.committed }

// state returns the ledger for a Handoff, its expiries relative to now.
func (l *Ledger) state(now time.Time) LedgerState {
	s := LedgerState{Route: l.route, Holders: make([]HolderState, 0, len(l.holders))}
	for _, h := range l.holders {
		s.Holders = append(s.Holders, HolderState{Node: h.node, Budget: h.budget, Has: h.has, Held: h.held,
			Need: h.need, Want: h.want, OnFloor: h.onFloor, Grant: h.grant, Floor: h.floor, Lapsed: h.lapsed,
			ExpiresIn: max(h.expires.Sub(now), 0), Vouched: h.vouched, VouchedFor: max(h.vouchEnd.Sub(now), 0)})
	}
	sort.Slice(s.Holders, func(i, j int) bool { return s.Holders[i].Node < s.Holders[j].Node })
	return s
}

// install adds the holders of a Handoff received at now, keeping any holder
// already here (it renewed since: it is newer) but counting the larger
// commitment of the two. It returns the holders whose leases it must expire.
func (l *Ledger) install(s LedgerState, now time.Time) []*holder {
	var out []*holder
	for _, hs := range s.Holders {
		if h := l.holders[hs.Node]; h != nil {
			l.unlink(h)
			h.has = max(h.has, hs.Grant, hs.Has)
			h.held = max(h.held, hs.Held)
			if end := now.Add(hs.VouchedFor); hs.Vouched > 0 && end.After(now) {
				h.vouched = max(h.vouched, hs.Vouched)
				if end.After(h.vouchEnd) {
					h.vouchEnd = end
				}
			}
			if !h.lapsed {
				l.budgets[h.budget]++
				l.live++
				l.wants.add(h.need, 1)
			}
			l.link(h)
			continue
		}
		h := &holder{node: hs.Node, budget: hs.Budget, has: hs.Has, held: hs.Held, need: hs.Need, want: hs.Want,
			onFloor: hs.OnFloor, grant: hs.Grant, floor: hs.Floor, lapsed: hs.Lapsed, expires: now.Add(hs.ExpiresIn), bigIdx: -1}
		if hs.Vouched > 0 && hs.VouchedFor > 0 {
			h.vouched, h.vouchEnd = hs.Vouched, now.Add(hs.VouchedFor)
		}
		l.holders[h.node] = h
		heap.Push(&l.big, h)
		if !h.lapsed {
			l.budgets[h.budget]++
			l.live++
			l.wants.add(h.need, 1)
			out = append(out, h)
		}
		l.link(h)
	}
	return out
}

// String describes the ledger's holders, for failure reports.
func (l *Ledger) String() string {
	out := ""
	for _, hs := range l.state(time.Time{}).Holders {
		out += fmt.Sprintf("[%s b%d has%d held%d need%d want%d floor%d/%d grant%d lapsed%v vouched%d] ", hs.Node, hs.Budget, hs.Has, hs.Held, hs.Need, hs.Want, hs.OnFloor, hs.Floor, hs.Grant, hs.Lapsed, hs.Vouched)
	}
	return out
}

// bigHeap is a max-heap of holders by commitment.
type bigHeap []*holder

func (q bigHeap) Len() int           { return len(q) }
func (q bigHeap) Less(i, j int) bool { return q[i].counted > q[j].counted }
func (q bigHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].bigIdx, q[j].bigIdx = i, j
}
func (q *bigHeap) Push(x any) {
	h := x.(*holder)
	h.bigIdx = len(*q)
	*q = append(*q, h)
}
func (q *bigHeap) Pop() any {
	old := *q
	h := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	h.bigIdx = -1
	return h
}
