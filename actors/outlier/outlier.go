// Package outlier is the rule that ejects a route's endpoint whose
// exchanges keep failing, as Envoy's outlier detection does with its
// consecutive-5xx rule: the route counts each endpoint's failed exchanges
// in a row (Counter), ejects an endpoint whose run reaches the policy's
// threshold, and never holds out more than the policy's share of its
// endpoints at once (Cutoff): beyond that share, the least recently ejected
// serve.
//
// The package decides and keeps no clock and no back-off of its own. The
// route feeds an ejection into the back-off it already keeps for endpoints
// whose dials fail (1 s doubling to 30 s, jittered), so that an endpoint has
// one ejection state, shown once (EjectedUntil), whichever rule ejected it;
// Cutoff reads the ejection times back from the route's entries. Nothing
// here is safe for concurrent use: the route actor calls it inside Receive.
package outlier

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of a Policy's fields.
const (
	DefaultConsecutiveFailures = 5
	DefaultMaxEjectedPercent   = 50
)

// ErrInvalidPolicy is returned (wrapped, with the field at fault) by
// Policy.Validate for a policy out of range.
var ErrInvalidPolicy = errors.New("outlier: invalid policy")

// Policy is the ejection rule: the value behind the client's
// Config.Outlier. Its zero fields take the defaults (WithDefaults).
type Policy struct {
	// ConsecutiveFailures ejects an endpoint whose last this many exchanges
	// failed (0 = DefaultConsecutiveFailures).
	ConsecutiveFailures int
	// MaxEjectedPercent bounds the share of a route's endpoints held out at
	// once, 1 to 100 (0 = DefaultMaxEjectedPercent); see MaxEjected.
	MaxEjectedPercent int
}

// WithDefaults returns p with its zero fields set to their defaults.
func (p Policy) WithDefaults() Policy {
	if p.ConsecutiveFailures == 0 {
		p.ConsecutiveFailures = DefaultConsecutiveFailures
	}
	if p.MaxEjectedPercent == 0 {
		p.MaxEjectedPercent = DefaultMaxEjectedPercent
	}
	return p
}

// Validate reports whether p, with its defaults, is in range:
// ConsecutiveFailures at least 1, MaxEjectedPercent 1 to 100. Its error
// wraps ErrInvalidPolicy.
func (p Policy) Validate() error {
	p = p.WithDefaults()
	switch {
	case p.ConsecutiveFailures < 1:
		return fmt.Errorf("%w: ConsecutiveFailures %d is below 1", ErrInvalidPolicy, p.ConsecutiveFailures)
	case p.MaxEjectedPercent < 1 || p.MaxEjectedPercent > 100:
		return fmt.Errorf("%w: MaxEjectedPercent %d is outside 1 to 100", ErrInvalidPolicy, p.MaxEjectedPercent)
	}
	return nil
}

// MaxEjected is how many of a route's total endpoints may be held out at
// once: MaxEjectedPercent of them, rounded down but at least one (a route
// of three at 10% can still eject its one bad endpoint, as Envoy does), and
// never all of them: one always serves (with total 1, none is held out).
// p has its defaults.
func (p Policy) MaxEjected(total int) int {
	if total <= 1 {
		return 0
	}
	return min(max(total*p.MaxEjectedPercent/100, 1), total-1)
}

// Counter is one endpoint's run of failed exchanges, kept in the route's
// entry for that endpoint. The zero value is a run of none.
type Counter struct {
	run int
}

// Record counts the outcome of one exchange with the endpoint and reports
// whether the endpoint is to be ejected now. An exchange failed when its
// response head was a 5xx, or it ended in an error after the lease (an
// outcome unknown, a reset, a response-header timeout); the route
// classifies it. A success ends the run; the failure that makes the run
// reach p.ConsecutiveFailures ejects (the run starts again from zero).
// While the endpoint is ejected (ejected: its back-off runs, whichever rule
// started it), outcomes of exchanges still in flight are not counted: when
// it comes back, its run starts from zero. p has its defaults.
func (c *Counter) Record(p Policy, failed, ejected bool) (eject bool) {
	if ejected || !failed {
		c.run = 0
		return false
	}
	c.run++
	if c.run < p.ConsecutiveFailures {
		return false
	}
	c.run = 0
	return true
}

// Run returns the failed exchanges in a row counted so far.
func (c *Counter) Run() int { return c.run }

// Cutoff says which of a route's ejected endpoints are held out at now,
// given each endpoint's ejection (at: when its current back-off began;
// until: when it ends; an endpoint is ejected while now is before until).
// An ejected endpoint is held out when it was ejected at or after the
// returned time; the others serve in spite of their back-off. That is every
// ejected endpoint while they are at most p.MaxEjected(len(eps)) (the zero
// time), and otherwise only that many, the most recently ejected: the least
// recently ejected serve first, since their back-off has run longest and
// they are the likeliest to have recovered. Costs O(len(eps) *
// MaxEjected), no allocation (a route has a few endpoints). Ejections at
// the same instant are held out together, which may hold one more than the
// share. p has its defaults.
func Cutoff[E any](p Policy, now time.Time, eps []E, ejection func(E) (at, until time.Time)) time.Time {
	ejected := 0
	for _, e := range eps {
		if _, until := ejection(e); now.Before(until) {
			ejected++
		}
	}
	hold := p.MaxEjected(len(eps))
	if ejected <= hold {
		return time.Time{}
	}
	if hold == 0 {
		return farFuture
	}
	// Walk down from the latest ejection until hold endpoints are held.
	var cut time.Time
	for held := 0; held < hold; {
		var next time.Time
		n := 0
		for _, e := range eps {
			at, until := ejection(e)
			switch {
			case !now.Before(until) || (!cut.IsZero() && !at.Before(cut)):
			case n == 0 || at.After(next):
				next, n = at, 1
			case at.Equal(next):
				n++
			}
		}
		if n == 0 {
			break
		}
		cut, held = next, held+n
	}
	return cut
}

// farFuture is a cutoff no ejection reaches: none is held out.
var farFuture = time.Unix(1<<62, 0)

// Held reports whether an endpoint ejected at at, until until, is held out
// at now under cutoff (Cutoff's answer).
func Held(cutoff, now, at, until time.Time) bool {
	return now.Before(until) && !at.Before(cutoff)
}
