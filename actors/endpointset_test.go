package actors

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

func aps(addrs ...string) []netip.AddrPort {
	out := make([]netip.AddrPort, len(addrs))
	for i, a := range addrs {
		out[i] = netip.MustParseAddrPort(a)
	}
	return out
}

// seeded returns a deterministic draw from [0, 1).
func seeded() func() float64 { return rand.New(rand.NewPCG(1, 2)).Float64 }

var t0 = time.Unix(1000, 0)

// Twelve connections over three addresses go four to each: each dial goes to
// the address with the fewest open connections.
func TestEndpointsSpreadConnectionsEvenly(t *testing.T) {
	var s endpointSet
	s.update(aps("127.0.0.2:80", "127.0.0.3:80", "127.0.0.4:80"))
	rnd := seeded()
	for range 12 {
		p, f := s.pick(t0, rnd)
		if f != nil {
			t.Fatalf("fallback %v for a single-family set", f.addr)
		}
		s.dialing(p)
	}
	for _, e := range s.list {
		if e.open != 4 || e.dials != 4 {
			t.Errorf("%v: %d open, %d dials, want 4 and 4", e.addr, e.open, e.dials)
		}
	}
}

// Among addresses with as few connections, each is picked: ties go at random.
func TestEndpointsBreakTiesAtRandom(t *testing.T) {
	var s endpointSet
	s.update(aps("127.0.0.2:80", "127.0.0.3:80", "127.0.0.4:80", "127.0.0.5:80"))
	rnd := seeded()
	seen := map[netip.AddrPort]int{}
	for range 400 {
		p, _ := s.pick(t0, rnd)
		seen[p.addr]++
	}
	for _, e := range s.list {
		if n := seen[e.addr]; n < 60 || n > 140 {
			t.Errorf("%v picked %d times of 400 among four ties, want about 100", e.addr, n)
		}
	}
}

// An address whose dial fails is passed over until its back-off ends: 1 s,
// then doubling to 30 s, each ±20%; a dial that connects starts it over.
func TestAFailingEndpointIsEjectedForADoublingBackOff(t *testing.T) {
	var s endpointSet
	s.update(aps("127.0.0.2:80", "127.0.0.3:80"))
	bad, good := s.list[0], s.list[1]
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		30 * time.Second, 30 * time.Second}
	now := t0
	for i, d := range want {
		for _, j := range []float64{0, 0.5, 0.999} {
			e := &endpoint{backoff: bad.backoff}
			s.failed(e, now, j)
			if got, lo, hi := e.ejectedUntil.Sub(now), d*8/10, d*12/10; got < lo || got > hi {
				t.Fatalf("failure %d, jitter %v: ejected for %v, want within [%v, %v]", i+1, j, got, lo, hi)
			}
		}
		healthy := s.failed(bad, now, 0.5)
		if healthy != (i == 0) {
			t.Fatalf("failure %d: reported healthy before = %v", i+1, healthy)
		}
		if p, _ := s.pick(now, seeded()); p != good {
			t.Fatalf("failure %d: picked %v while it is ejected", i+1, p.addr)
		}
		now = bad.ejectedUntil
		if p, _ := s.pick(now, seeded()); p != bad && p.open == bad.open {
			t.Fatalf("failure %d: its back-off over, the tie went to %v", i+1, p.addr)
		}
	}
	if bad.failures != int64(len(want)) {
		t.Fatalf("%d failures counted, want %d", bad.failures, len(want))
	}
	if !s.connected(bad) || bad.backoff != 0 || !bad.ejectedUntil.IsZero() {
		t.Fatalf("a dial that connects: back-off %v until %v, want both cleared", bad.backoff, bad.ejectedUntil)
	}
	if s.connected(good) {
		t.Fatal("a healthy endpoint reported as recovering")
	}
}

// When every address is ejected, the one with the fewest connections is
// dialed all the same (the route's breaker, not the set, fails callers), and
// usable says that no other address is left.
func TestWithEveryEndpointEjectedOneIsStillPicked(t *testing.T) {
	var s endpointSet
	s.update(aps("127.0.0.2:80", "127.0.0.3:80"))
	s.dialing(s.list[0])
	if !s.usable(t0) {
		t.Fatal("not usable before any failure")
	}
	s.failed(s.list[0], t0, 0.5)
	if !s.usable(t0) {
		t.Fatal("not usable with one address left")
	}
	s.failed(s.list[1], t0, 0.5)
	if s.usable(t0) {
		t.Fatal("usable with every address ejected")
	}
	if p, _ := s.pick(t0, seeded()); p != s.list[1] {
		t.Fatalf("picked %v, want the ejected address with fewer connections", p.addr)
	}
}

// As net.Dialer does, the primary is of the first address's family and the
// fallback of the other; with the first family ejected, the other is the
// primary, with no fallback.
func TestADualStackSetPicksAPrimaryAndAFallbackPerFamily(t *testing.T) {
	var s endpointSet
	s.update(aps("[2001:db8::1]:80", "[2001:db8::2]:80", "192.0.2.1:80"))
	p, f := s.pick(t0, seeded())
	if !p.addr.Addr().Is6() || f == nil || f.addr.String() != "192.0.2.1:80" {
		t.Fatalf("picked %v and %v, want an IPv6 primary and the IPv4 fallback", p, f)
	}
	s.failed(s.list[0], t0, 0.5)
	s.failed(s.list[1], t0, 0.5)
	p, f = s.pick(t0, seeded())
	if p.addr.String() != "192.0.2.1:80" || f != nil {
		t.Fatalf("picked %v and %v, want the IPv4 address alone", p, f)
	}
}

// An address that leaves the set drains while it has connections and goes
// with its last one; one that comes back keeps its counts; new ones start
// fresh; a name given twice counts once.
func TestAnAddressThatLeavesTheSetDrainsUntilItsLastConnection(t *testing.T) {
	var s endpointSet
	s.update(aps("127.0.0.2:80", "127.0.0.3:80"))
	a, b := s.list[0], s.list[1]
	s.dialing(a)
	s.dialing(a)
	gone := s.update(aps("127.0.0.3:80", "127.0.0.4:80", "127.0.0.4:80"))
	if len(gone) != 1 || gone[0] != a || !a.draining {
		t.Fatalf("gone %v, want only 127.0.0.2 draining", gone)
	}
	if len(s.list) != 3 || s.list[0] != b || s.list[2] != a {
		t.Fatalf("set %v, want the live ones in the resolver's order, then the draining one", s.stats(t0))
	}
	for range 3 {
		if p, _ := s.pick(t0, seeded()); p == a {
			t.Fatal("a new connection went to a draining address")
		}
	}
	if len(s.update(aps("127.0.0.3:80", "127.0.0.4:80"))) != 0 {
		t.Fatal("an address already draining reported gone again")
	}
	s.closed(a)
	if s.find(a.addr) == nil {
		t.Fatal("a draining address went with a connection left")
	}
	s.closed(a)
	if s.find(a.addr) != nil {
		t.Fatal("a draining address stayed after its last connection")
	}

	s.update(aps("127.0.0.3:80"))
	c := s.find(netip.MustParseAddrPort("127.0.0.4:80"))
	if c != nil {
		t.Fatal("an address without connections drains instead of going")
	}
	s.dialing(b)
	s.update(aps("127.0.0.4:80"))
	s.update(aps("127.0.0.3:80", "127.0.0.4:80"))
	if b.draining || b.open != 1 || b.dials != 1 || s.find(b.addr) != b {
		t.Fatalf("an address back in the set: draining %v, %d open, %d dials, want its counts kept", b.draining, b.open, b.dials)
	}
}

// A connection to an address outside the set (dialed by name before a set was
// known) is adopted as draining, and goes with its connection.
func TestAConnectionOutsideTheSetIsAdoptedAsDraining(t *testing.T) {
	var s endpointSet
	if !s.empty() {
		t.Fatal("the zero set is not empty")
	}
	if p, _ := s.pick(t0, seeded()); p != nil {
		t.Fatal("the empty set picked an address")
	}
	s.update(aps("127.0.0.2:80"))
	e := s.adopt(netip.MustParseAddrPort("127.0.0.9:80"))
	if !e.draining || s.adopt(e.addr) != e || len(s.list) != 2 {
		t.Fatalf("adopted %+v, want one draining entry", e)
	}
	e.open++
	s.closed(e)
	if len(s.list) != 1 {
		t.Fatal("the adopted address stayed after its connection")
	}
	if live := s.adopt(netip.MustParseAddrPort("127.0.0.2:80")); live.draining {
		t.Fatal("a connection to a live address adopted as draining")
	}
}

// Stats name each endpoint with its counts, and its ejection only while it
// lasts.
func TestEndpointStatsShowAnEjectionWhileItLasts(t *testing.T) {
	var s endpointSet
	s.update(aps("127.0.0.2:80"))
	e := s.list[0]
	s.dialing(e)
	s.failed(e, t0, 0.5)
	st := s.stats(t0)
	if len(st) != 1 || st[0].Open != 1 || st[0].Dials != 1 || st[0].DialFailures != 1 || st[0].EjectedUntil != e.ejectedUntil {
		t.Fatalf("stats %+v", st)
	}
	if st := s.stats(e.ejectedUntil); !st[0].EjectedUntil.IsZero() {
		t.Fatalf("ejection shown after it ended: %+v", st)
	}
}
