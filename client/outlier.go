package client

import "github.com/connactor/connactor/actors"

// OutlierPolicy ejects an address of a route's host whose exchanges keep
// failing (Config.Outlier; README, "Sick endpoints"), as Envoy's outlier
// detection does with its consecutive-5xx rule. A failed exchange is a 5xx
// response head, or an error after the connection was leased
// (ErrOutcomeUnknown: a reset, a close before the head; a response-header
// timeout), or a response body the server cuts short after a good head; a
// caller that gives up or closes the body early, a request whose body
// fails, and errors before anything was sent do not count. An ejected address gets no new
// connection and no new request for the back-off failed dials use (1 s
// doubling to 30 s, jittered, shown in EndpointStats.EjectedUntil, with
// EjectedBy "exchanges"); its idle connections close, and the others as
// their exchanges end. When it comes back, its count of failures starts
// again from zero, and its first exchange that succeeds ends the doubling.
// The rule applies to routes that spread over a host's addresses
// (Config.Resolver, DNSRefresh); a route with one address never ejects it.
type OutlierPolicy struct {
	// ConsecutiveFailures ejects an address whose last this many exchanges
	// failed (default 5).
	ConsecutiveFailures int
	// MaxEjectedPercent is the largest share of a route's addresses held
	// out at once, 1 to 100 (default 50; at least one address, and never
	// all). With more ejected, or every address ejected, the least recently
	// ejected serve.
	MaxEjectedPercent int
}

// outlierDefaults validates Config.Outlier and fills its defaults in a copy
// of it (the caller's value is left as it is).
func (cfg *Config) outlierDefaults() error {
	if cfg.Outlier == nil {
		return nil
	}
	p := actors.OutlierPolicy{ConsecutiveFailures: cfg.Outlier.ConsecutiveFailures,
		MaxEjectedPercent: cfg.Outlier.MaxEjectedPercent}
	if err := p.Validate(); err != nil {
		return err
	}
	p = p.WithDefaults()
	cfg.Outlier = &OutlierPolicy{ConsecutiveFailures: p.ConsecutiveFailures, MaxEjectedPercent: p.MaxEjectedPercent}
	return nil
}

// outlierPolicy is Config.Outlier (defaults filled) as the routes hold it.
func (cfg *Config) outlierPolicy() *actors.OutlierPolicy {
	if cfg.Outlier == nil {
		return nil
	}
	return &actors.OutlierPolicy{ConsecutiveFailures: cfg.Outlier.ConsecutiveFailures,
		MaxEjectedPercent: cfg.Outlier.MaxEjectedPercent}
}
