package actors

import (
	"net/netip"
	"slices"
	"time"

	"github.com/connactor/connactor/actors/outlier"
	"github.com/connactor/connactor/route"
)

// A route's endpoint set: the addresses its host resolves to, each with the
// route's own counts, as a plain value owned by the route actor and tested
// on its own. The route picks where a new connection goes (pick), ejects an
// address whose dials fail for a back-off (failed), and drains an address
// that leaves the resolved set (update): its connections close as they come
// free, and none goes to it again.

// Ejection back-off of an endpoint whose dials fail: EjectBase at first,
// doubling with each failure in a row up to EjectMax, with ±20% jitter (as
// Envoy's outlier detection ejects a host on connect failures).
const (
	EjectBase = time.Second
	EjectMax  = 30 * time.Second
)

// endpoint is one address of a route's endpoint set and the route's counts
// for it.
type endpoint struct {
	addr     netip.AddrPort
	open     int   // the route's connections to it, open or being dialed
	dials    int64 // dials made to it
	failures int64 // dials to it whose connect failed
	// ejectedUntil is when an endpoint whose last dial failed may be dialed
	// again; backoff is how long its next ejection lasts (0 = EjectBase).
	ejectedUntil time.Time
	backoff      time.Duration
	draining     bool // it left the resolved set; it goes once its last connection has

	// The outlier rule's part (route_outlier.go): the run of failed
	// exchanges, when the current back-off began (either rule's: the
	// least recently ejected serve past the cap, outlier.Cutoff), which rule
	// started it, and the ejections for failed exchanges.
	run       outlier.Counter
	ejectedAt time.Time
	ejectedBy string // ejectedByDials or ejectedByExchanges; "" before the first ejection
	ejections uint64
}

// Which rule started an endpoint's back-off (EndpointStats.EjectedBy).
const (
	ejectedByDials     = "dials"     // its dials failed to connect
	ejectedByExchanges = "exchanges" // its exchanges failed (Config.Outlier)
)

// ejected reports whether the endpoint is backing off at now.
func (e *endpoint) ejected(now time.Time) bool { return now.Before(e.ejectedUntil) }

// endpointSet is a route's endpoints: those of the last resolution in the
// resolver's order, then those that left it and still have connections
// (draining). The zero value is empty.
type endpointSet struct {
	list []*endpoint
	// outlier is the route's outlier policy (Config.Outlier, defaults
	// filled): it caps the share of the live endpoints held out at once,
	// whichever rule ejected them (cutoff). nil = every ejected endpoint is
	// held out while another remains.
	outlier *outlier.Policy
}

// update makes addrs (the resolver's answer, never empty) the live set:
// an address already known keeps its entry and counts (and stops draining
// if it had left), a new one gets a fresh entry, and one that left starts
// draining, or goes at once when it has no connection. It returns the
// addresses that started draining.
func (s *endpointSet) update(addrs []netip.AddrPort) (gone []*endpoint) {
	live := make([]*endpoint, 0, len(addrs)+len(s.list))
	for _, a := range addrs {
		if slices.ContainsFunc(live, func(e *endpoint) bool { return e.addr == a }) {
			continue // the resolver named it twice
		}
		e := s.find(a)
		if e == nil {
			e = &endpoint{addr: a}
		}
		e.draining = false
		live = append(live, e)
	}
	next := live
	for _, e := range s.list {
		if slices.Contains(live, e) {
			continue
		}
		if !e.draining {
			e.draining = true
			gone = append(gone, e)
		}
		if e.open > 0 {
			next = append(next, e)
		}
	}
	s.list = next
	return gone
}

// find returns the entry of addr, or nil.
func (s *endpointSet) find(addr netip.AddrPort) *endpoint {
	for _, e := range s.list {
		if e.addr == addr {
			return e
		}
	}
	return nil
}

// adopt returns the entry of a connection's address: its own, or for an
// address outside the set (a connection dialed by name before the set was
// known) a new draining one, so that the connection is counted, shown and
// closed when it comes free.
func (s *endpointSet) adopt(addr netip.AddrPort) *endpoint {
	if e := s.find(addr); e != nil {
		return e
	}
	e := &endpoint{addr: addr, draining: true}
	s.list = append(s.list, e)
	return e
}

// empty reports whether no address is known (no resolution has succeeded).
func (s *endpointSet) empty() bool { return len(s.list) == 0 || s.list[0].draining }

// pick chooses where a new connection goes: the live endpoint with the
// fewest open connections of the route, ties broken at random (rnd draws
// from [0, 1)). As net.Dialer does for a dual-stack host, the primary is of
// the family of the resolver's first address, and the fallback, raced
// against it, the best of the other family (nil when it has none to offer).
// Ejected endpoints are passed over while another remains (with an outlier
// policy, those held out: see cutoff): the primary
// comes from the other family when its own are all ejected, and from all
// the live ones, ejected or not, when every one is (a probe as good as any).
// It returns nil when the set is empty.
func (s *endpointSet) pick(now time.Time, rnd func() float64) (primary, fallback *endpoint) {
	if s.empty() {
		return nil, nil
	}
	v4 := s.list[0].addr.Addr().Is4()
	cut := s.cutoff(now)
	primary = s.least(now, rnd, func(e *endpoint) bool { return e.addr.Addr().Is4() == v4 && !e.held(cut, now) })
	other := s.least(now, rnd, func(e *endpoint) bool { return e.addr.Addr().Is4() != v4 && !e.held(cut, now) })
	switch {
	case primary != nil:
		return primary, other
	case other != nil:
		return other, nil
	}
	return s.least(now, rnd, func(*endpoint) bool { return true }), nil
}

// cutoff says which ejected endpoints are held out at now (outlier.Cutoff):
// with an outlier policy, no more than its share of the live endpoints, the
// most recently ejected; without one, every ejected endpoint (the zero
// time). Read it with held.
func (s *endpointSet) cutoff(now time.Time) time.Time {
	if s.outlier == nil {
		return time.Time{}
	}
	return outlier.Cutoff(*s.outlier, now, s.live(), ejection)
}

// ejection is an endpoint's current back-off, for outlier.Cutoff.
func ejection(e *endpoint) (at, until time.Time) { return e.ejectedAt, e.ejectedUntil }

// held reports whether e is held out at now under cut (endpointSet.cutoff):
// it gets no new connection, and, ejected for failed exchanges, no new
// stream or request (route_outlier.go).
func (e *endpoint) held(cut, now time.Time) bool {
	return outlier.Held(cut, now, e.ejectedAt, e.ejectedUntil)
}

// least returns the live endpoint that ok accepts with the fewest open
// connections; among several, each is as likely (reservoir sampling).
func (s *endpointSet) least(now time.Time, rnd func() float64, ok func(*endpoint) bool) *endpoint {
	var best *endpoint
	ties := 0
	for _, e := range s.list {
		if e.draining || !ok(e) {
			continue
		}
		switch {
		case best == nil || e.open < best.open:
			best, ties = e, 1
		case e.open == best.open:
			ties++
			if rnd()*float64(ties) < 1 {
				best = e
			}
		}
	}
	return best
}

// dialing counts a dial to e, whose connection counts as open from now.
func (s *endpointSet) dialing(e *endpoint) {
	e.open++
	e.dials++
}

// moved moves a connection counted at from to to (the fallback of a Happy
// Eyeballs dial won: it was dialed too).
func (s *endpointSet) moved(from, to *endpoint) {
	to.open++
	to.dials++
	s.closed(from)
}

// closed counts out a connection of e (closed, or its dial failed); a
// draining endpoint goes with its last one.
func (s *endpointSet) closed(e *endpoint) {
	e.open--
	if e.open < 0 {
		panic("actors: internal error: endpoint connection closed twice")
	}
	if e.draining && e.open == 0 {
		if i := slices.Index(s.list, e); i >= 0 {
			s.list = slices.Delete(s.list, i, i+1)
		}
	}
}

// failed counts a dial to e whose connect failed and ejects e: for its
// back-off, jittered by ±20% (jitter draws from [0, 1)), which then doubles
// up to EjectMax. It reports whether e was healthy before (the state change
// the route logs).
func (s *endpointSet) failed(e *endpoint, now time.Time, jitter float64) (wasHealthy bool) {
	e.failures++
	return s.eject(e, now, jitter, ejectedByDials)
}

// exchangesFailed ejects e for a run of failed exchanges (the outlier rule,
// route_outlier.go) into the same back-off as failed, without counting a
// dial failure. It reports whether e was healthy before.
func (s *endpointSet) exchangesFailed(e *endpoint, now time.Time, jitter float64) (wasHealthy bool) {
	e.ejections++
	return s.eject(e, now, jitter, ejectedByExchanges)
}

// eject starts e's back-off at now, by rule by: the one ejection state of
// an endpoint, whichever rule ejected it.
func (s *endpointSet) eject(e *endpoint, now time.Time, jitter float64, by string) (wasHealthy bool) {
	wasHealthy = e.backoff == 0
	d := e.backoff
	if d == 0 {
		d = EjectBase
	}
	e.ejectedAt, e.ejectedBy = now, by
	e.ejectedUntil = now.Add(time.Duration(float64(d) * (0.8 + 0.4*jitter)))
	e.backoff = min(2*d, EjectMax)
	return wasHealthy
}

// connected records a dial to e that connected: a back-off its dials
// started starts over. One its exchanges started does not: a connect says
// nothing of how the server answers (exchangeServed ends that one). It
// reports whether e had been ejected (the state change the route logs).
func (s *endpointSet) connected(e *endpoint) (wasEjected bool) {
	if e.ejectedBy == ejectedByExchanges {
		return false
	}
	wasEjected = e.backoff != 0
	e.backoff, e.ejectedUntil = 0, time.Time{}
	return wasEjected
}

// exchangeServed records an exchange with e that succeeded while e is not
// ejected: a back-off its exchanges started starts over (the next ejection
// lasts EjectBase again). It reports whether e had been ejected.
func (s *endpointSet) exchangeServed(e *endpoint) (wasEjected bool) {
	if e.ejectedBy != ejectedByExchanges || e.backoff == 0 {
		return false
	}
	e.backoff, e.ejectedUntil = 0, time.Time{}
	return true
}

// live returns the endpoints of the last resolution (those that left it
// follow them in the list).
func (s *endpointSet) live() []*endpoint {
	for i, e := range s.list {
		if e.draining {
			return s.list[:i]
		}
	}
	return s.list
}

// usable reports whether a live endpoint other than those ejected at now
// remains: a dial that failed is then tried again elsewhere instead of
// failing its caller.
func (s *endpointSet) usable(now time.Time) bool {
	for _, e := range s.list {
		if !e.draining && !e.ejected(now) {
			return true
		}
	}
	return false
}

// stats returns the endpoints' stats at now, without their leased and idle
// counts (the route's connections know those: see Route.endpointStats).
func (s *endpointSet) stats(now time.Time) []route.EndpointStats {
	if len(s.list) == 0 {
		return nil
	}
	out := make([]route.EndpointStats, len(s.list))
	for i, e := range s.list {
		out[i] = route.EndpointStats{Addr: e.addr, Open: e.open, Dials: e.dials, DialFailures: e.failures,
			Draining: e.draining, Ejections: e.ejections}
		if e.ejected(now) {
			out[i].EjectedUntil, out[i].EjectedBy = e.ejectedUntil, e.ejectedBy
		}
	}
	return out
}
