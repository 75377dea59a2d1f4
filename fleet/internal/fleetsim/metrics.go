package fleetsim

import (
	"math"
	"sort"
	"time"
)

// sampleEvery is how often the run looks at the whole fleet's shares.
const sampleEvery = 250 * time.Millisecond

// Converged: the members that can be reached hold at least this part of
// what max-min fair division of each route's budget over their demand gives
// (utilisation), and fall short of their whole-connection fair shares by at
// most shortfallMax of them.
const (
	utilMin      = 0.95
	shortfallMax = 0.05
)

// settleHold is how long the fleet must stay converged after a change to
// count as converged (from the first sample of that stretch).
const settleHold = 3 * time.Second

type metrics struct {
	s *Sim

	maxOver, overEvents int
	firstOver           time.Duration

	messages uint64

	changes []Change
	samples []sample

	// Per route, the pools of members that count (alive, reachable), and
	// the max-min fair level of their demands; rebuilt when demand or
	// eligibility changes.
	dirty   bool
	byRoute [][]*pool
	level   []float64

	// Fairness over the current demand window.
	windowStart time.Time
	acc         map[*pool]*fairAcc
	jain        []float64
	onWindow    func(map[*pool]*fairAcc) // tests look at a window's figures

	routesUsed float64 // routes with demand per member, summed over the draws
	draws      int

	// The waits for a first connection that began in a quiet stretch (after
	// a demand shift, before the next fault): the rotation's, not a fault's.
	quietFrom, quietUntil time.Time
	waits                 []time.Duration
}

type fairAcc struct{ held, fair float64 }

type sample struct {
	at              time.Time
	util, shortfall float64
	converged       bool
}

// Change is one change in the timeline and how long the fleet took to
// converge after it.
type Change struct {
	At       time.Duration // since the start
	What     string
	Converge time.Duration // until converged, to stay so for settleHold
	Settled  bool          // converged so before the next change
}

func (mt *metrics) init(s *Sim) { mt.s = s; mt.dirty = true; mt.acc = map[*pool]*fairAcc{} }

func (mt *metrics) overcommit(route, over int) {
	if mt.overEvents == 0 {
		mt.firstOver = mt.s.c.now.Sub(t0)
	}
	mt.overEvents++
	mt.maxOver = max(mt.maxOver, over)
}

func (mt *metrics) change(what string) {
	now := mt.s.c.now
	mt.changes = append(mt.changes, Change{At: now.Sub(t0), What: what})
	mt.quietUntil = now // a fault, or a shift: what waits now is not quiet
	if what == "start" || what == "demand shift" {
		mt.quietFrom, mt.quietUntil = now, now.Add(quietFor)
	}
}

// quietFor is how long after a demand shift a wait that begins is counted
// (the faults come 15 s after the shifts).
const quietFor = 10 * time.Second

// waited records a wait for a first connection from from to now, when it
// began and ended in a quiet stretch.
func (mt *metrics) waited(from, now time.Time) {
	if !from.Before(mt.quietFrom) && from.Before(mt.quietUntil) && len(mt.changes) > 0 &&
		!from.Before(t0.Add(mt.changes[len(mt.changes)-1].At)) {
		mt.waits = append(mt.waits, now.Sub(from))
	}
}

func (mt *metrics) demandChanged() {
	mt.dirty = true
	mt.closeWindow()
}

func (mt *metrics) eligibilityChanged() { mt.dirty = true }

func eligible(m *member) bool { return m.alive && !m.leaving && !m.partitioned }

func (mt *metrics) rebuild() {
	s := mt.s
	mt.byRoute = make([][]*pool, len(s.routes))
	mt.level = make([]float64, len(s.routes))
	for _, m := range s.members {
		if !eligible(m) {
			continue
		}
		for _, p := range m.order {
			if p.demand > 0 {
				mt.byRoute[p.route] = append(mt.byRoute[p.route], p)
			}
		}
	}
	for r, ps := range mt.byRoute {
		mt.level[r] = waterLevel(float64(s.cfg.Budget), ps)
	}
	mt.dirty = false
}

// waterLevel is the max-min fair level of budget over the pools' demands
// (infinite when the budget covers them all).
func waterLevel(budget float64, ps []*pool) float64 {
	d := make([]float64, len(ps))
	total := 0.0
	for i, p := range ps {
		d[i] = float64(p.demand)
		total += d[i]
	}
	if total <= budget {
		return math.Inf(1)
	}
	sort.Float64s(d)
	left := budget
	for i, v := range d {
		fair := left / float64(len(d)-i)
		if v >= fair {
			return fair
		}
		left -= v
	}
	return math.Inf(1)
}

func (mt *metrics) startSampling() {
	var next func()
	next = func() {
		mt.sample()
		mt.s.c.after(sampleEvery, next)
	}
	mt.s.c.after(sampleEvery, next)
}

func (mt *metrics) sample() {
	if mt.dirty {
		mt.rebuild()
	}
	var held, best, short, whole float64
	for r, ps := range mt.byRoute {
		if len(ps) == 0 {
			continue
		}
		var hr, dr float64
		for _, p := range ps {
			fair := min(float64(p.demand), mt.level[r])
			hr += float64(p.held)
			dr += float64(p.demand)
			short += max(0, math.Floor(fair)-float64(p.held))
			whole += math.Floor(fair)
			a := mt.acc[p]
			if a == nil {
				a = &fairAcc{}
				mt.acc[p] = a
			}
			a.held += float64(p.held)
			a.fair += fair
		}
		held += hr
		best += min(float64(mt.s.cfg.Budget), dr)
	}
	smp := sample{at: mt.s.c.now, util: 1, shortfall: 0}
	if best > 0 {
		smp.util = held / best
	}
	if whole > 0 {
		smp.shortfall = short / whole
	}
	smp.converged = smp.util >= utilMin && smp.shortfall <= shortfallMax
	mt.samples = append(mt.samples, smp)
}

// closeWindow ends a demand window: Jain's index of the members' average
// connections against their average max-min fair shares.
func (mt *metrics) closeWindow() {
	if mt.onWindow != nil {
		mt.onWindow(mt.acc)
	}
	if len(mt.acc) > 0 {
		var sum, sq float64
		n := 0
		for _, m := range mt.s.members { // in order: float sums depend on it
			for _, p := range m.order {
				a := mt.acc[p]
				if a == nil || a.fair <= 0 {
					continue
				}
				x := a.held / a.fair
				sum += x
				sq += x * x
				n++
			}
		}
		if n > 0 && sq > 0 {
			mt.jain = append(mt.jain, sum*sum/(float64(n)*sq))
		}
	}
	mt.acc = map[*pool]*fairAcc{}
	mt.windowStart = mt.s.c.now
}

// Result is a run's figures.
type Result struct {
	Config Config
	// MaxOver is the worst sum of connections over the budget on any route
	// at any moment (0: never over); OverEvents counts the moments.
	MaxOver, OverEvents int
	FirstOver           time.Duration
	Changes             []Change
	// Jain is the mean of the demand windows' Jain indexes, JainMin the
	// lowest.
	Jain, JainMin float64
	// MsgsPerMember is the messages between members per member per second
	// (renewals, replies, nudges, handoffs); MsgsPerHost the messages each
	// host that owned shards sent and received per second (mean and most).
	MsgsPerMember            float64
	MsgsPerHost, MsgsHostMax float64
	// RenewalsPerMember is the keepers' renewals per member per second.
	RenewalsPerMember float64
	// CPUPerRequest is the hosts' CPU time per renewal entry (the thread's
	// CPU time on Linux, sampled one renewal in cpuSampleEvery entries;
	// elsewhere the wall clock).
	CPUPerRequest time.Duration
	CPUClock      string // what CPUPerRequest was read from
	Requests      uint64
	Util          float64 // mean utilisation over the run's samples
	// RoutesPerMember is the mean number of routes a member has demand on.
	RoutesPerMember float64
	// WaitMean and WaitMax are how long a member's callers on a route
	// waited for its first connection there, over the waits that began in
	// the 10 s after a demand shift (rotation and first grants, no fault).
	WaitMean, WaitMax time.Duration
	// Series is the run's samples: utilisation and shortfall over time.
	Series []Point
}

// Point is one sample of a run.
type Point struct {
	At              time.Duration // since the start
	Util, Shortfall float64
	Converged       bool
}

func (mt *metrics) result() Result {
	s := mt.s
	mt.closeWindow()
	secs := s.cfg.Duration.Seconds()
	r := Result{Config: s.cfg, MaxOver: mt.maxOver, OverEvents: mt.overEvents, FirstOver: mt.firstOver, CPUClock: cpuClock,
		MsgsPerMember: float64(mt.messages) / float64(len(s.members)) / secs, Requests: s.requests}
	if s.cpuRequests > 0 {
		r.CPUPerRequest = s.cpu / time.Duration(s.cpuRequests)
	}
	var sent, hostMsgs float64
	hosts := 0
	for _, m := range s.members {
		sent += float64(m.sent)
		if m.hostMsgs > 0 {
			hosts++
			hostMsgs += float64(m.hostMsgs)
			r.MsgsHostMax = max(r.MsgsHostMax, float64(m.hostMsgs)/secs)
		}
	}
	r.RenewalsPerMember = sent / float64(len(s.members)) / secs
	if hosts > 0 {
		r.MsgsPerHost = hostMsgs / float64(hosts) / secs
	}
	if len(mt.jain) > 0 {
		r.JainMin = 1
		for _, j := range mt.jain {
			r.Jain += j
			r.JainMin = min(r.JainMin, j)
		}
		r.Jain /= float64(len(mt.jain))
	}
	for _, smp := range mt.samples {
		r.Util += smp.util
		r.Series = append(r.Series, Point{At: smp.at.Sub(t0), Util: smp.util, Shortfall: smp.shortfall, Converged: smp.converged})
	}
	if mt.draws > 0 {
		r.RoutesPerMember = mt.routesUsed / float64(mt.draws)
	}
	if len(mt.waits) > 0 {
		var sum time.Duration
		for _, w := range mt.waits {
			sum += w
			r.WaitMax = max(r.WaitMax, w)
		}
		r.WaitMean = sum / time.Duration(len(mt.waits))
	}
	if len(mt.samples) > 0 {
		r.Util /= float64(len(mt.samples))
	}
	for i, c := range mt.changes {
		start := t0.Add(c.At)
		end := t0.Add(s.cfg.Duration)
		if i+1 < len(mt.changes) {
			end = t0.Add(mt.changes[i+1].At)
		}
		// Converged once it stays so for settleHold (or to the window's
		// end): demand that comes and goes makes brief dips later on,
		// which are not the change's doing.
		var since time.Time
		c.Settled, c.Converge = false, 0
		for _, smp := range mt.samples {
			if smp.at.Before(start) || !smp.at.Before(end) {
				continue
			}
			switch {
			case !smp.converged:
				since = time.Time{}
			case since.IsZero():
				since = smp.at
			}
			if !since.IsZero() && smp.at.Sub(since) >= settleHold {
				break
			}
		}
		if !since.IsZero() {
			c.Settled, c.Converge = true, since.Sub(start)
		}
		mt.changes[i] = c
	}
	r.Changes = mt.changes
	return r
}
