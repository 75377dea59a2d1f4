package hedge

import (
	"fmt"
	"math"
	"net/http"
	"time"
)

// Defaults and bounds of a Policy's fields.
const (
	DefaultPercentile  = 0.95
	DefaultMaxAttempts = 2
	DefaultBudget      = 0.1
	MaxAttempts        = 5
	// BudgetFloor is how many hedged attempts the budget allows over its
	// window whatever the route's traffic, so that a quiet route can hedge.
	BudgetFloor = 10
)

// Policy says when a request is hedged. Its zero fields take the defaults
// (WithDefaults); Validate says whether it is in range. It is the value
// behind the client's Config.Hedge.
type Policy struct {
	// Delay: a further attempt goes when the last one written has had no
	// response head for this long. 0 = the route's measured latency at
	// Percentile (no hedge until the route has measured enough: see
	// MinSamples).
	Delay time.Duration
	// Percentile of the route's latency that makes the delay when Delay is
	// 0, in (0, 1) (0 = DefaultPercentile).
	Percentile float64
	// MaxAttempts counts all attempts, the first included, 1 to MaxAttempts
	// (0 = DefaultMaxAttempts). 1 means no hedge.
	MaxAttempts int
	// Budget: hedged attempts over the last ten seconds are at most Budget
	// times the route's requests in them, plus BudgetFloor (0 =
	// DefaultBudget).
	Budget float64
}

// WithDefaults returns p with its zero fields set to their defaults.
func (p Policy) WithDefaults() Policy {
	if p.Percentile == 0 {
		p.Percentile = DefaultPercentile
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.Budget == 0 {
		p.Budget = DefaultBudget
	}
	return p
}

// Validate reports whether p, with its defaults, is in range: Delay not
// negative, Percentile in (0, 1), MaxAttempts 1 to MaxAttempts, Budget a
// finite number not below 0. Its error wraps ErrInvalidPolicy.
func (p Policy) Validate() error {
	p = p.WithDefaults()
	switch {
	case p.Delay < 0:
		return fmt.Errorf("%w: Delay %v is negative", ErrInvalidPolicy, p.Delay)
	case !(p.Percentile > 0 && p.Percentile < 1):
		return fmt.Errorf("%w: Percentile %v is outside (0, 1)", ErrInvalidPolicy, p.Percentile)
	case p.MaxAttempts < 1 || p.MaxAttempts > MaxAttempts:
		return fmt.Errorf("%w: MaxAttempts %d is outside 1 to %d", ErrInvalidPolicy, p.MaxAttempts, MaxAttempts)
	case !(p.Budget >= 0) || math.IsInf(p.Budget, 1):
		return fmt.Errorf("%w: Budget %v is not a finite number >= 0", ErrInvalidPolicy, p.Budget)
	}
	return nil
}

// On reports whether p (nil: none) hedges at all: it allows a further
// attempt.
func (p *Policy) On() bool { return p != nil && p.MaxAttempts >= 2 }

// Measured reports whether p hedges after the route's measured latency (no
// fixed Delay): the route then keeps a sketch of it.
func (p *Policy) Measured() bool { return p.On() && p.Delay == 0 }

// Eligible reports whether r may be hedged at all: it is idempotent (GET,
// HEAD, OPTIONS or TRACE, or it carries an Idempotency-Key or
// X-Idempotency-Key header), and its body can be sent more than once (none,
// http.NoBody, or GetBody set). This is net/http's rule for replaying a
// request on a new connection (Request.isReplayable), for the same reason:
// the server may see the request more than once.
func Eligible(r *http.Request) bool {
	if r.Body != nil && r.Body != http.NoBody && r.GetBody == nil {
		return false
	}
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	// net/http looks the keys up as they are stored, canonical or not.
	if _, ok := r.Header["Idempotency-Key"]; ok {
		return true
	}
	if _, ok := r.Header["X-Idempotency-Key"]; ok {
		return true
	}
	return false
}
