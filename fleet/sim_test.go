package fleet

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The simulation runs the keeper's route logic (routeShare, stepped as
// keeperActor.step does) and the grain's ledger on a fake clock, with the
// faults of a real cluster: messages delayed at random (so calls overtake each
// other), lost requests and answers, calls abandoned at their deadline whose
// goroutines end seconds later, and the grain moving to another member (a new
// ledger in safe mode; requests to the old one are lost). Each node's pool
// opens connections up to its share and closes them after random delays (a
// request in flight is never cut). After every event it checks the budget:
// the connections the nodes hold never sum to more than it.

type simEvent struct {
	at  time.Time
	seq int
	fn  func()
}

type simQueue []simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type simNode struct {
	calls   int // grain calls begun
	id      nodeID
	r       *routeShare
	held    int // connections really open (the invariant counts these)
	demand  int
	closing int // closes scheduled
}

type sim struct {
	t      *testing.T
	rng    *rand.Rand
	now    time.Time
	q      simQueue
	seq    int
	budget int
	lease  time.Duration
	p      params
	nodes  []*simNode

	ledger     *ledger
	generation int  // grows with every activation
	down       bool // the grain is between two activations

	faults     bool
	loss, slow float64
	maxLatency time.Duration
	peak       int
	moves      int
}

func (s *sim) after(d time.Duration, fn func()) {
	s.seq++
	heap.Push(&s.q, simEvent{at: s.now.Add(d), seq: s.seq, fn: fn})
}

// latency is a message's delay: mostly short, but with faults on some
// messages are slow (a lookup stuck on a dead owner, a stalled connection)
// and arrive long after their call was abandoned.
func (s *sim) latency() time.Duration {
	if s.faults && s.rng.Float64() < s.slow {
		return time.Second + time.Duration(s.rng.Int64N(int64(5*time.Second)))
	}
	return time.Duration(s.rng.Int64N(int64(s.maxLatency) + 1))
}

func (s *sim) lost() bool { return s.faults && s.rng.Float64() < s.loss }

func (s *sim) run(until time.Time) {
	for s.q.Len() > 0 && s.q[0].at.Before(until) {
		e := heap.Pop(&s.q).(simEvent)
		s.now = e.at
		e.fn()
		s.check()
	}
	s.now = until
}

func (s *sim) check() {
	sum := 0
	for _, n := range s.nodes {
		sum += n.held
	}
	s.peak = max(s.peak, sum)
	if sum > s.budget {
		s.t.Fatalf("at %v the nodes hold %d connections, budget %d: %s", s.now.Sub(t0), sum, s.budget, s.describe())
	}
}

func (s *sim) describe() string {
	out := ""
	for _, n := range s.nodes {
		share, floor := n.r.share(s.now, 0)
		out += fmt.Sprintf("\n  %s held %d demand %d share %d (floor %v) grant %d has %d", n.id.ID, n.held, n.demand, share, floor, n.r.grant, n.r.has(s.now))
	}
	return out
}

// step is keeperActor.step without the actor: abandon, call, enforce.
func (s *sim) step(n *simNode) {
	n.r.abandon(s.now, &s.p)
	if n.r.due(s.now, &s.p) {
		n.calls++
		s.send(n, n.r.begin(s.now, &s.p, n.id, 0))
	}
	s.enforce(n)
}

// enforce is the pool: open while under the share and the demand, schedule
// closes while over either (each close waits for its request to finish).
func (s *sim) enforce(n *simNode) {
	share, _ := n.r.share(s.now, 0)
	changed := false
	for n.held < min(share, n.demand) {
		n.held++
		changed = true
	}
	for n.held-n.closing > min(share, n.demand) {
		n.closing++
		s.after(time.Duration(s.rng.Int64N(int64(300*time.Millisecond))), func() {
			n.closing--
			n.held--
			s.report(n)
		})
	}
	if changed {
		s.report(n)
	}
}

func (s *sim) report(n *simNode) {
	n.r.usage(s.now, n.held, 0, max(0, n.demand-n.held))
	s.step(n)
}

func (s *sim) send(n *simNode, req shareRequest) {
	gen := s.generation
	end := func(resp shareResponse, err error) {
		n.r.ended(s.now, req.Seq, resp, err)
		s.step(n)
	}
	if s.lost() {
		// The request never arrives; the caller's goroutine ends with an
		// error seconds later (disthash's fixed 5 s wait on a dead owner).
		s.after(time.Second+time.Duration(s.rng.Int64N(int64(5*time.Second))), func() { end(shareResponse{}, ErrCallTimeout) })
		return
	}
	s.after(s.latency(), func() {
		if s.down || gen != s.generation {
			s.after(s.latency(), func() { end(shareResponse{}, fmt.Errorf("dead letter")) })
			return
		}
		resp, nudge := s.ledger.apply(s.now, req)
		for _, id := range nudge {
			for _, o := range s.nodes {
				if o.id == id && !s.lost() {
					s.after(s.latency(), func() { o.r.nudge(s.now); s.step(o) })
				}
			}
		}
		if s.lost() {
			s.after(s.p.callTimeout+time.Duration(s.rng.Int64N(int64(time.Second))), func() { end(shareResponse{}, ErrCallTimeout) })
			return
		}
		s.after(s.latency(), func() { end(resp, nil) })
	})
}

// move kills the grain's activation; a new one starts after a short gap.
func (s *sim) move() {
	s.down = true
	s.generation++
	s.moves++
	s.after(time.Duration(s.rng.Int64N(int64(time.Second))), func() {
		s.down = false
		s.ledger = newLedger(s.now, s.lease)
	})
}

func newSim(t *testing.T, seed uint64, nodes, budget int) *sim {
	s := &sim{
		t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), now: t0, budget: budget, lease: testLease,
		p:          params{budget: budget, block: max(1, budget/16), callTimeout: time.Second, idleRelease: testLease, minGap: 10 * time.Millisecond, maxInFlight: 4},
		maxLatency: 40 * time.Millisecond,
	}
	s.ledger = newLedger(t0, s.lease)
	for i := range nodes {
		n := &simNode{id: node(fmt.Sprintf("n%d", i)), r: newRouteShare("r", t0)}
		s.nodes = append(s.nodes, n)
	}
	var tick func()
	tick = func() {
		for _, n := range s.nodes {
			s.step(n)
		}
		s.after(tickInterval, tick)
	}
	s.after(0, tick)
	return s
}

func (s *sim) churnDemand(every time.Duration, until time.Time) {
	var churn func()
	churn = func() {
		if !s.now.Before(until) {
			return
		}
		n := s.nodes[s.rng.IntN(len(s.nodes))]
		switch s.rng.IntN(3) {
		case 0:
			n.demand = 0
		case 1:
			n.demand = s.rng.IntN(s.budget + 1)
		default:
			n.demand = 2 * s.budget
		}
		s.report(n)
		if s.now.Before(until) {
			s.after(time.Duration(s.rng.Int64N(int64(every))), churn)
		}
	}
	s.after(0, churn)
}

func TestSimulatedFleetNeverExceedsTheBudgetUnderFaults(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			s := newSim(t, seed, 3+int(seed%3), 10+int(seed%4)*7)
			s.faults, s.loss, s.slow = true, 0.05, 0.05
			faultsEnd := t0.Add(60 * time.Second)
			s.churnDemand(2*time.Second, faultsEnd)
			var moves func()
			moves = func() {
				s.move()
				if s.now.Before(faultsEnd) {
					s.after(time.Duration(s.rng.Int64N(int64(15*time.Second))), moves)
				}
			}
			s.after(5*time.Second, moves)
			s.run(faultsEnd)

			// Calm: no faults, everyone busy. Within a few leases the
			// shares are max-min fair and the whole budget is in use.
			s.faults = false
			for _, n := range s.nodes {
				n.demand = 2 * s.budget
				n.calls = 0
				s.report(n)
			}
			const calm = 20 * time.Second
			s.run(s.now.Add(calm))
			for _, n := range s.nodes {
				// Renewals every lease/3, retries every lease/8 while short:
				// about 4 a second at most, not a storm.
				if limit := int(calm / (testLease / 12)); n.calls > limit {
					t.Errorf("%s made %d grain calls in %v of calm, want at most %d", n.id.ID, n.calls, calm, limit)
				}
			}
			sum := 0
			for _, n := range s.nodes {
				share, _ := n.r.share(s.now, 0)
				fair := s.budget / len(s.nodes)
				if share < fair || share > fair+1 {
					t.Errorf("%s: share %d, fair is %d or %d%s", n.id.ID, share, fair, fair+1, s.describe())
				}
				sum += n.held
			}
			if sum != s.budget {
				t.Errorf("calm fleet holds %d of %d%s", sum, s.budget, s.describe())
			}
			t.Logf("%d nodes, budget %d: peak %d, %d grain moves", len(s.nodes), s.budget, s.peak, s.moves)
		})
	}
}

func TestSimulatedSurvivorTakesADeadNodesShareWithinALease(t *testing.T) {
	s := newSim(t, 7, 3, 30)
	for _, n := range s.nodes {
		n.demand = 60
		s.report(n)
	}
	s.run(t0.Add(10 * time.Second))
	// n0 dies: its connections go with it and it never calls again.
	dead := s.nodes[0]
	dead.held, dead.demand = 0, 0
	s.nodes = s.nodes[1:]
	died := s.now
	var back time.Time
	for back.IsZero() && s.now.Before(died.Add(20*time.Second)) {
		s.run(s.now.Add(10 * time.Millisecond))
		sum := 0
		for _, n := range s.nodes {
			sum += n.held
		}
		if sum == s.budget {
			back = s.now
		}
	}
	if back.IsZero() {
		t.Fatalf("the survivors never held the whole budget:%s", s.describe())
	}
	if took := back.Sub(died); took > testLease+2*time.Second {
		t.Errorf("the dead node's share came back after %v, want within a lease and two renewals", took)
	}
	t.Logf("the dead node's share came back after %v (lease %v)", back.Sub(died), testLease)
}
