package hedge

import "time"

// Budget bounds a route's hedged attempts: over the last BudgetWindow, at
// most ratio times the route's requests in it, plus BudgetFloor. Without a
// budget, a route that turned slow as a whole would have every request pass
// the hedge delay and send MaxAttempts times its load to a server already
// struggling; with it, hedging adds at most a tenth (by default) however
// slow the route is.
//
// It counts requests and hedges in one-second buckets indexed by unix
// second, each tagged with its second and cleared when reused: the shape of
// the client's retry budget (client/budget.go). That one is shared by every
// caller of a client, so its counters are atomic and striped; this one has
// one owner, the route actor, so its counters are plain integers.
//
// The zero value is an empty budget. It is not safe for concurrent use.
type Budget struct {
	buckets [budgetSeconds]budgetBucket
}

// BudgetWindow is the span over which Budget counts.
const BudgetWindow = budgetSeconds * time.Second

const budgetSeconds = 10

type budgetBucket struct {
	sec              int64 // the unix second the counts belong to
	requests, hedges uint32
}

// at returns the bucket of second sec, cleared if it held an older second.
func (b *Budget) at(sec int64) *budgetBucket {
	k := &b.buckets[uint64(sec)%budgetSeconds]
	if k.sec != sec {
		*k = budgetBucket{sec: sec}
	}
	return k
}

// Request counts one request of the route, made at now (each request once,
// whatever its attempts).
func (b *Budget) Request(now time.Time) { b.at(now.Unix()).requests++ }

// Counts returns the requests and hedged attempts counted in the window
// ending at now.
func (b *Budget) Counts(now time.Time) (requests, hedges int) {
	sec := now.Unix()
	for i := range b.buckets {
		if k := &b.buckets[i]; k.sec > sec-budgetSeconds && k.sec <= sec {
			requests += int(k.requests)
			hedges += int(k.hedges)
		}
	}
	return requests, hedges
}

// Allow reports whether one more hedged attempt at now fits the budget with
// ratio (Policy.Budget), and counts it if so: the hedges of the window, this
// one included, may be at most ratio times its requests plus BudgetFloor.
func (b *Budget) Allow(now time.Time, ratio float64) bool {
	requests, hedges := b.Counts(now)
	if float64(hedges+1) > ratio*float64(requests)+BudgetFloor {
		return false
	}
	b.at(now.Unix()).hedges++
	return true
}
