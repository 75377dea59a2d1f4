package fleet

import (
	"sort"
	"time"
)

// ledger is a budget grain's state for one route: the leases it granted. It is
// a plain value, touched only inside the grain's Receive, and takes the time as
// an argument so that tests can drive it.
//
// The rule it keeps: the sum over nodes of max(grant, has, held) never exceeds
// the budget once safe mode is over, where grant is what the ledger last
// granted a node, has what the node said it enforces and held what it said it
// holds. A node can only grow to its grant, and it only drops below has after
// it received the smaller grant, which its next request confirms (it then
// reports that grant as has). So until a node confirms a shrink, the ledger
// keeps counting the old, larger share: a reply that is lost or late can only
// make the ledger count too much, never too little.
//
// A new ledger starts in safe mode for one lease length: a previous activation
// of the grain (on a member that died, or that the grain moved away from) may
// have granted leases that nobody has reported yet. While in safe mode a node
// gets at most what it may use when it asks: the lease it has, or the floor it
// fell to when its lease expired while the grain could not be reached. So no
// node grows and the sum of grants cannot exceed the budget: the leases came
// from the previous activation's budget, and floors (Budget / members by
// default) add up to no more than the budget. Once one lease length has
// passed, every lease the previous activation granted has either expired or
// been reported here. Granting floors in safe mode matters when a grain's host
// dies: the others' leases often expire before the member provider notices,
// and a safe mode that granted only leases would cut them from their floors
// to nothing for a lease length.
type ledger struct {
	lease     time.Duration
	safeUntil time.Time
	holders   map[string]*holder // by nodeID.key()
	// forgotten keeps, for one lease length, the last sequence number of a
	// node the ledger forgot because it held and wanted nothing: a request of
	// that node sent earlier but arriving later (a keeper runs several calls
	// at once) is stale, and must not bring back a share the node gave up.
	forgotten map[string]forgottenNode
}

type forgottenNode struct {
	seq   uint64
	until time.Time
}

// holder is one node's lease as the ledger knows it.
type holder struct {
	node            nodeID
	budget          int
	has, held, want int
	grant           int
	seq             uint64
	expires         time.Time
	nudgedAt        time.Time
	target          int // the max-min fair share at the node's last request
}

func (h *holder) committed() int { return max(h.grant, h.has, h.held) }

// newLedger returns a ledger activated at now, in safe mode until now+lease.
func newLedger(now time.Time, lease time.Duration) *ledger {
	return &ledger{lease: lease, safeUntil: now.Add(lease), holders: map[string]*holder{}, forgotten: map[string]forgottenNode{}}
}

// nudgeGap is the least time between two RenewNow nudges to one node.
func (l *ledger) nudgeGap() time.Duration { return l.lease / 10 }

// apply records r, received at now, and answers it. It also returns the nodes
// worth nudging (RenewNow): when r could not be given its fair share, the nodes
// above theirs; when r gave budget back, the nodes still short of theirs.
func (l *ledger) apply(now time.Time, r shareRequest) (shareResponse, []nodeID) {
	l.expire(now)
	key := r.Node.key()
	h := l.holders[key]
	if h != nil && r.Seq <= h.seq {
		return shareResponse{Stale: true, Grant: h.grant, Budget: l.budget(), Lease: l.lease, Nodes: len(l.holders)}, nil
	}
	if f, ok := l.forgotten[key]; ok { // a forgotten node has no holder (apply deletes one to forget it)
		if r.Seq <= f.seq {
			return shareResponse{Stale: true, Budget: l.budget(), Lease: l.lease, Nodes: len(l.holders)}, nil
		}
		delete(l.forgotten, key)
	}
	before := l.committed()
	if h == nil {
		h = &holder{node: r.Node}
		l.holders[key] = h
	}
	h.budget, h.has, h.held, h.want, h.seq = r.Budget, r.Has, r.Held, min(r.Want, r.Budget), r.Seq
	h.expires = now.Add(l.lease)

	budget := l.budget()
	keys, targets := l.targets(budget)
	for i, k := range keys {
		l.holders[k].target = targets[i]
	}
	others := l.committed() - h.committed()
	grant := max(0, min(h.target, budget-others))
	resp := shareResponse{Budget: budget, Lease: l.lease}
	safe := now.Before(l.safeUntil)
	if safe {
		grant = min(grant, max(r.Has, r.Floor))
		resp.Safe = l.safeUntil.Sub(now)
	}
	h.grant = grant
	resp.Grant = grant

	// A node granted less than it wants should not ask again at once: not
	// before safe mode ends, else not before others had time to give some
	// back. A nudge brings it back earlier when the ledger frees budget.
	var nudge []nodeID
	if grant < h.want {
		resp.RetryAfter = l.lease / 8
		if safe {
			resp.RetryAfter = resp.Safe
		}
	}
	if !safe && grant < min(h.want, h.target) {
		// Short of its fair share: the nodes above theirs must shrink.
		nudge = l.nudgeWhere(now, key, func(o *holder) bool { return o.committed() > o.target })
	}
	if !safe && l.committed() < before {
		more := l.nudgeWhere(now, key, func(o *holder) bool { return o.grant < min(o.want, o.target) })
		nudge = append(nudge, more...)
	}
	if h.committed() == 0 && h.want == 0 {
		delete(l.holders, key) // nothing held, nothing wanted: forget the node
		l.forgotten[key] = forgottenNode{seq: h.seq, until: now.Add(l.lease)}
	}
	resp.Nodes = len(l.holders)
	return resp, nudge
}

// expire forgets the nodes whose lease ran out: they hold nothing any more, or
// they hold a floor, which the ledger does not count (see Config.Floor).
func (l *ledger) expire(now time.Time) {
	for k, h := range l.holders {
		if !now.Before(h.expires) {
			delete(l.holders, k)
		}
	}
	for k, f := range l.forgotten {
		if !now.Before(f.until) {
			delete(l.forgotten, k)
		}
	}
}

// budget is the smallest budget any node with a lease asked for: nodes that
// disagree (a rolling change of configuration) get the stricter one.
func (l *ledger) budget() int {
	b := -1
	for _, h := range l.holders {
		if b < 0 || h.budget < b {
			b = h.budget
		}
	}
	return max(b, 0)
}

func (l *ledger) committed() int {
	sum := 0
	for _, h := range l.holders {
		sum += h.committed()
	}
	return sum
}

// targets divides budget max-min fair by the holders' wants, in key order so
// that integer leftovers always go to the same nodes.
func (l *ledger) targets(budget int) ([]string, []int) {
	keys := make([]string, 0, len(l.holders))
	for k := range l.holders {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	wants := make([]int, len(keys))
	for i, k := range keys {
		wants[i] = l.holders[k].want
	}
	return keys, maxMinFair(budget, wants)
}

func (l *ledger) nudgeWhere(now time.Time, except string, pred func(*holder) bool) []nodeID {
	var out []nodeID
	for k, o := range l.holders {
		if k == except || !pred(o) || now.Sub(o.nudgedAt) < l.nudgeGap() {
			continue
		}
		o.nudgedAt = now
		out = append(out, o.node)
	}
	return out
}
