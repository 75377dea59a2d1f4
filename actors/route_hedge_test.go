package actors

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connactor/connactor/actors/hedge"
	"github.com/connactor/connactor/internal/wait"
)

// hedging gives the pool's routes pol (with its defaults) and a clock that
// stands still at the returned time unless the test moves it.
func hedging(pol hedge.Policy, now *atomic.Int64) poolOpt {
	return func(cfg *SupervisorConfig) {
		p := pol.WithDefaults()
		cfg.Route.Hedge = &p
		now.Store(time.Unix(1_800_000_000, 0).UnixNano())
		cfg.Route.Now = func() time.Time { return time.Unix(0, now.Load()) }
	}
}

// askHedge sends h a hedge's LeaseRequest for a request whose first attempt
// went on conn at written, and returns its ticket.
func (p *pool) askHedge(h *routeHandle, conn uint64, written time.Time) *wait.Ticket[Lease] {
	t := &wait.Ticket[Lease]{}
	p.sys.Root.Send(h.PID, &LeaseRequest{Ticket: t,
		Hedge: &HedgeAsk{Attempts: hedge.Attempts{Written: 1, LastWritten: written}, Conns: []uint64{conn}}})
	return t
}

// refusal returns when a refused hedge may ask again (zero: never), failing
// the test if it was served.
func refusal(t *testing.T, tk *wait.Ticket[Lease]) time.Time {
	t.Helper()
	_, err := result(t, tk)
	var r *HedgeRefused
	if !errors.As(err, &r) {
		t.Fatalf("answer %v, want a refusal", err)
	}
	return r.RetryAt
}

func TestARouteRefusesAHedgeAtOnceWhenItHasNoRoom(t *testing.T) {
	var now atomic.Int64
	p := newPool(t, 1, 10, hedging(hedge.Policy{Delay: time.Millisecond}, &now))
	h := p.route("a.test")
	first := p.lease(h, 1)[0] // the route's only connection
	at := time.Unix(0, now.Load())
	if retry := refusal(t, p.askHedge(h, first.ConnID, at.Add(-time.Second))); !retry.Equal(at.Add(time.Millisecond)) {
		t.Fatalf("retry at %v, want after another delay (%v)", retry, at.Add(time.Millisecond))
	}
	if st := p.stats(h); st.Pending != 0 || st.Open != 1 {
		t.Fatalf("pending %d, open %d: a refused hedge neither queues nor dials", st.Pending, st.Open)
	}
}

func TestARouteServesAHedgeOnAnotherConnectionWhileItHasRoom(t *testing.T) {
	var now atomic.Int64
	p := newPool(t, 2, 10, hedging(hedge.Policy{Delay: time.Millisecond}, &now))
	h := p.idleRoute("a.test", 2)
	first := p.lease(h, 1)[0]
	at := time.Unix(0, now.Load())
	// Not due yet: asked again when the delay has passed since the write.
	if retry := refusal(t, p.askHedge(h, first.ConnID, at)); !retry.Equal(at.Add(time.Millisecond)) {
		t.Fatalf("retry at %v, want %v", retry, at.Add(time.Millisecond))
	}
	l := p.leased(p.askHedge(h, first.ConnID, at.Add(-time.Millisecond)))
	if l.ConnID == first.ConnID {
		t.Fatal("the hedge went on the first attempt's connection")
	}
	// No room left, and the route dials none beyond its limit.
	refusal(t, p.askHedge(h, first.ConnID, at.Add(-time.Millisecond)))
}

func TestTheRoutesBudgetBoundsHedgesByItsRequests(t *testing.T) {
	var now atomic.Int64
	p := newPool(t, 40, 40, hedging(hedge.Policy{Delay: time.Millisecond}, &now))
	h := p.idleRoute("a.test", 20)
	due := time.Unix(0, now.Load()).Add(-time.Second)
	// The route has counted 20 requests (idleRoute's releases): 0.1 x 20 +
	// BudgetFloor hedges.
	for range 2 + hedge.BudgetFloor {
		p.leased(p.askHedge(h, 0, due))
	}
	refusal(t, p.askHedge(h, 0, due))
	// Ten requests of the route (a Released each, not a hedge's) allow one
	// more hedge at the default ratio of 0.1.
	for range 10 {
		p.sys.Root.Send(h.PID, &Released{ConnID: 1 << 40})
	}
	p.leased(p.askHedge(h, 0, due))
	refusal(t, p.askHedge(h, 0, due))
}

func TestARouteHedgesAtItsMeasuredLatencyOnlyOnceItHasMeasuredEnough(t *testing.T) {
	var now atomic.Int64
	p := newPool(t, 4, 10, hedging(hedge.Policy{}, &now))
	h := p.idleRoute("a.test", 2)
	due := time.Unix(0, now.Load()).Add(-time.Second)
	if retry := refusal(t, p.askHedge(h, 0, due)); !retry.IsZero() {
		t.Fatalf("retry at %v: a route that has not measured its latency hedges nothing", retry)
	}
	written := time.Unix(0, now.Load())
	for range 4 * hedgeRepublish {
		p.sys.Root.Send(h.PID, &Released{ConnID: 1 << 40, latencySample: latencySample{Written: written, Head: written.Add(2 * time.Millisecond)}})
	}
	p.stats(h)
	if d := time.Duration(h.Pub.HedgeDelay.Load()); d < 2*time.Millisecond*15/16 || d > 2*time.Millisecond*17/16 {
		t.Fatalf("published delay %v, want the p95 of 2ms samples", d)
	}
	p.leased(p.askHedge(h, 0, due))
}
