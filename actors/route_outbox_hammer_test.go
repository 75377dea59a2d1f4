package actors

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/wait"
)

// The hammer: 12 callers on a route of 8 connections, half of them taking
// offers when there are some and asking the route otherwise, half always
// asking the route (as fresh replays do), holding each connection a random
// while (hammerOffers).
func TestOffersKeepTheFIFOBoundAndTheLimitsUnderAHammer(t *testing.T) {
	const conns = 8
	hm := &offerHammer{}
	p := newPool(t, conns, conns, withFault(hm.hook))
	rh := p.idleRoute("a", conns)
	hm.run(t, p, rh, 12, 400, 1)
	if st := p.stats(rh); st.Open > conns || p.dialCount() > conns || p.supStats().Total > conns {
		t.Fatalf("limits exceeded: open %d, dials %d, total %d", st.Open, p.dialCount(), p.supStats().Total)
	}
}

// offerHammer runs callers on a route that take offers when there are some
// (half of them) or ask the route, as often as rounds each, holding each
// lease a random while. It checks, for every LeaseRequest W the route
// handled, that the takes from the outbox that happened wholly between the
// route taking W up and granting W are no more than the offers the outbox
// held when the route took W up (each take is stamped before and after it,
// the route's events by its fault hook); that no caller waits in the FIFO
// while an offer sits in the outbox; and that no connection is held by more
// than maxHeld callers at once (1 for HTTP/1.1; an HTTP/2 connection's
// stream limit).
type offerHammer struct {
	seq        atomic.Uint64
	h          atomic.Pointer[routeHandle]
	mu         sync.Mutex
	started    map[*wait.Ticket[Lease]][2]uint64 // start stamp, offers held then
	granted    map[*wait.Ticket[Lease]]uint64
	violations atomic.Int32
}

// hook is the route's fault hook (withFault).
func (hm *offerHammer) hook(kind string, msg any) {
	rh := hm.h.Load()
	if rh == nil {
		return
	}
	switch kind {
	case "route":
		if rh.Pub.Pending.Load() > 0 && len(rh.outbox) > 0 {
			hm.violations.Add(1) // the previous message left callers waiting and offers out
		}
		if m, ok := msg.(*LeaseRequest); ok {
			held := uint64(len(rh.outbox))
			s := hm.seq.Add(1)
			hm.mu.Lock()
			hm.started[m.Ticket] = [2]uint64{s, held}
			hm.mu.Unlock()
		}
	case "granted":
		g := hm.seq.Add(1)
		hm.mu.Lock()
		hm.granted[msg.(*LeaseRequest).Ticket] = g
		hm.mu.Unlock()
	}
}

func (hm *offerHammer) run(t *testing.T, p *pool, rh *routeHandle, callers, rounds, maxHeld int) {
	t.Helper()
	hm.mu.Lock()
	hm.started, hm.granted = map[*wait.Ticket[Lease]][2]uint64{}, map[*wait.Ticket[Lease]]uint64{}
	hm.mu.Unlock()
	before := p.stats(rh)
	hm.h.Store(rh)
	type take struct{ pre, post uint64 }
	takes := make([][]take, callers)
	var hmu sync.Mutex
	holders := map[uint64]*atomic.Int32{}
	var wg sync.WaitGroup
	for c := 0; c < callers; c++ {
		wg.Go(func() {
			for i := 0; i < rounds; i++ {
				var l Lease
				ok := false
				pre := hm.seq.Add(1)
				if c%2 == 0 {
					l, ok = rh.take(time.Now())
				}
				post := hm.seq.Add(1)
				if ok {
					takes[c] = append(takes[c], take{pre, post})
				} else {
					l = p.leased(p.ask(rh))
				}
				hmu.Lock()
				in := holders[l.ConnID]
				if in == nil {
					in = &atomic.Int32{}
					holders[l.ConnID] = in
				}
				hmu.Unlock()
				if n := in.Add(1); n > int32(maxHeld) {
					t.Errorf("connection %d held by %d callers, at most %d may", l.ConnID, n, maxHeld)
				}
				for range rand.IntN(3) {
					runtime.Gosched()
				}
				in.Add(-1)
				p.release(rh, true, l)
			}
		})
	}
	wg.Wait()
	hm.h.Store(nil)
	if n := hm.violations.Load(); n > 0 {
		t.Fatalf("%d times a message left callers waiting with offers in the outbox", n)
	}
	var all []take
	for _, ts := range takes {
		all = append(all, ts...)
	}
	hm.mu.Lock()
	defer hm.mu.Unlock()
	checked, worst := 0, 0
	for tk, s := range hm.started {
		g, ok := hm.granted[tk]
		if !ok {
			t.Fatalf("a LeaseRequest taken up at %d was never granted", s[0])
		}
		overtook := 0
		for _, tt := range all {
			if tt.pre > s[0] && tt.post < g {
				overtook++
			}
		}
		if overtook > int(s[1]) {
			t.Fatalf("a caller was overtaken by %d takes with %d offers in the outbox when the route took it up", overtook, s[1])
		}
		worst = max(worst, overtook)
		checked++
	}
	st := p.stats(rh)
	t.Logf("%d LeaseRequests checked, %d takes, most takes while one waited: %d; route: %d leases, %d offered",
		checked, len(all), worst, st.Leases, st.Offered)
	if len(all) == 0 || checked == 0 {
		t.Fatalf("the hammer exercised %d takes and %d requests: both paths are needed", len(all), checked)
	}
	if st.Leases-before.Leases != uint64(callers*rounds) || st.Offered-before.Offered != uint64(len(all)) ||
		st.Pending != 0 || st.Leased != 0 {
		t.Fatalf("after %d leases, %d of them offers: %d leases and %d offered counted, %d pending, %d leased",
			callers*rounds, len(all), st.Leases-before.Leases, st.Offered-before.Offered, st.Pending, st.Leased)
	}
}
