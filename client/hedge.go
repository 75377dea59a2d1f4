package client

import (
	"context"
	"fmt"
	"time"

	"github.com/connactor/connactor/actors"
)

// HedgePolicy says when a request is hedged (Config.Hedge): when its
// attempt has had no response head for a delay, a further attempt goes on
// another connection or HTTP/2 stream of the same route (to another of the
// host's addresses when one is up), and the first response head wins; the
// other attempts are cancelled at once (HTTP/1.1: their connection closes;
// HTTP/2: the stream is reset). Zero fields take their defaults.
//
// A hedge goes only while the route has room under its limits (an idle
// connection, a free stream, or room to dial under MaxConnsPerRoute with
// nobody waiting), and counts against every limit, MaxConcurrentRequests
// included; it never waits in the route's queue.
type HedgePolicy struct {
	// Delay: a further attempt goes when the last one sent has had no
	// response head for this long, counted from when it was written (not
	// from a wait for a connection). 0 = the route's latency (write to
	// response head) at Percentile, measured over the last 5 to 10 s: no
	// request is hedged until the route has measured enough of them (40
	// for the default percentile).
	Delay time.Duration
	// Percentile of the route's latency that makes the delay when Delay is
	// 0, in (0, 1) (default 0.95).
	Percentile float64
	// MaxAttempts counts all attempts, the first included (default 2, at
	// most 5; 1 turns hedging off).
	MaxAttempts int
	// Budget: the route's hedged attempts over the last 10 s are at most
	// Budget times its requests in them, plus 10 (default 0.1), so that a
	// route slow as a whole is not sent MaxAttempts times its load.
	Budget float64
}

// WithoutHedge returns a context whose requests are never hedged, whatever
// Config.Hedge says.
func WithoutHedge(ctx context.Context) context.Context { return actors.WithoutHedge(ctx) }

// hedgeDefaults validates Hedge and fills its defaults (in a copy: the
// caller's HedgePolicy is left as it was).
func (cfg *Config) hedgeDefaults() error {
	if cfg.Hedge == nil {
		return nil
	}
	p := cfg.hedgePolicy()
	if err := p.Validate(); err != nil {
		return fmt.Errorf("Hedge: %w", err)
	}
	cfg.Hedge = &HedgePolicy{Delay: p.Delay, Percentile: p.Percentile, MaxAttempts: p.MaxAttempts, Budget: p.Budget}
	return nil
}

// hedgePolicy is Hedge as the pool takes it, with its defaults; nil without.
func (cfg *Config) hedgePolicy() *actors.HedgePolicy {
	if cfg.Hedge == nil {
		return nil
	}
	p := actors.HedgePolicy{Delay: cfg.Hedge.Delay, Percentile: cfg.Hedge.Percentile, MaxAttempts: cfg.Hedge.MaxAttempts,
		Budget: cfg.Hedge.Budget}.WithDefaults()
	return &p
}
