package actors

import (
	"net/netip"
	"testing"

	"github.com/connactor/connactor/internal/testkit/loopbacks"
	"github.com/connactor/connactor/route"
)

// HTTP/2 over a host's addresses (route_h2_spread.go), against the
// loopback server of the endpoint tests serving h2c on three addresses.

// A lone sequential caller keeps to one connection; streams that overlap
// open one connection per address, one dial at a time, each when a stream
// is leased while another is in flight; then each stream goes to the
// connection with the fewest in flight: six at once go two to each.
func TestHTTP2StreamsSpreadOverAConnectionPerAddress(t *testing.T) {
	addrs := loopbacks.Addrs(2, 4)
	f := newEPFixture(t, PoolConfig{Protocols: h2cOnly()}, loopbacks.Options{H2C: true}, addrs...)
	accepted := func() int { return total(f.srv.Counts(), func(c loopbacks.Counts) int { return c.Accepted }) }
	for i := range 5 {
		if err := f.get("/"); err != nil {
			t.Fatal(err)
		}
		if n := accepted(); n != 1 {
			t.Fatalf("request %d of a sequential caller: %d connections, want 1", i+1, n)
		}
	}
	for want := 2; want <= 3; want++ { // two streams at once: the second asks for a connection to an address without one
		f.hold(2).ok()
		f.waitServer("one more connection", func(c map[netip.Addr]loopbacks.Counts) bool {
			return total(c, func(c loopbacks.Counts) int { return c.Accepted }) == want
		})
		eventually(t, "the route has the new connection dialed", func() bool { st := f.route(); return st.Open == want && st.Idle == want })
	}
	h := f.hold(6)
	for _, a := range addrs {
		if c := f.srv.Counts()[a]; c.Accepted != 1 {
			t.Errorf("%v: %+v, want one connection", a, c)
		}
		if e, _ := f.endpoint(a); e.Open != 1 || e.Streams != 2 {
			t.Errorf("%v's endpoint %+v, want one connection carrying 2 of the 6 streams", a, e)
		}
	}
	h.ok()
	f.hold(9).ok() // more streams than addresses open no more connections
	if n := accepted(); n != 3 {
		t.Fatalf("%d connections after nine streams at once, want one per address", n)
	}
	if st := f.route(); st.ClosedBy[string(route.ReasonError)] != 0 {
		t.Fatalf("closes %v", st.ClosedBy)
	}
}
