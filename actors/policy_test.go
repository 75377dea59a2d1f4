package actors

import (
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

func TestBreakerOpensAfterThresholdBacksOffAndClosesOnSuccess(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := breaker{cfg: FailFast{Threshold: 3, Cooldown: time.Second, MaxCooldown: 4 * time.Second}}
	var dials uint64 // dial IDs, given out in order as a route does
	fail := func(now time.Time) dialVerdict { dials++; return b.dialFailed(dials, dials, now, 0.5) }
	for i := 0; i < 2; i++ {
		if fail(t0) != dialCounted || !b.allow(t0) {
			t.Fatalf("opened after %d failures", i+1)
		}
	}
	if fail(t0) != dialOpened || b.allow(t0) || b.state != breakerOpen {
		t.Fatal("not open after 3 failures")
	}
	// Each failed probe after a cool-down opens it again, twice as long,
	// capped (jitter 0.5 is exactly the cool-down).
	openedAt := t0
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		if i > 0 {
			openedAt = b.until
			if !b.allow(openedAt) || b.state != breakerHalfOpen || b.maxDials(8) != 1 {
				t.Fatalf("round %d: not half-open after the cool-down", i)
			}
			if fail(openedAt) != dialOpened {
				t.Fatalf("round %d: the failed probe did not open the breaker again", i)
			}
		}
		if got := b.until.Sub(openedAt); got != want {
			t.Fatalf("round %d: cool-down %v, want %v", i, got, want)
		}
	}
	if !b.dialSucceeded() || b.state != breakerClosed || b.failures != 0 || !b.allow(b.until) {
		t.Fatal("a successful probe did not close the breaker")
	}
	if b.rejected == 0 {
		t.Fatal("rejections not counted")
	}
}

// Dials already in flight when the breaker opens count toward nothing when
// they fail, open or half-open: only the probe's failure opens it again.
func TestBreakerIgnoresDialsThatStartedBeforeItOpened(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := breaker{cfg: FailFast{Threshold: 2, Cooldown: time.Second, MaxCooldown: time.Minute}}
	// Dials 1 to 8 go out together; 1 and 2 fail first and open it.
	if b.dialFailed(1, 8, t0, 0.5) != dialCounted || b.dialFailed(2, 8, t0, 0.5) != dialOpened {
		t.Fatal("two failures of a threshold of 2 did not open the breaker")
	}
	for id := uint64(3); id <= 5; id++ {
		if v := b.dialFailed(id, 8, t0.Add(time.Millisecond), 0.5); v != dialIgnored {
			t.Fatalf("dial %d, in flight when the breaker opened: %v, want ignored", id, v)
		}
	}
	if b.until != t0.Add(time.Second) || b.failures != 2 {
		t.Fatalf("cool-down until %v (want %v), %d failures counted (want 2)", b.until.Sub(t0), time.Second, b.failures)
	}
	half := t0.Add(time.Second)
	if !b.allow(half) || b.state != breakerHalfOpen {
		t.Fatal("not half-open after the cool-down")
	}
	for id := uint64(6); id <= 8; id++ {
		if v := b.dialFailed(id, 8, half, 0.5); v != dialIgnored || b.state != breakerHalfOpen {
			t.Fatalf("dial %d failing while half-open: %v, state %v; want ignored, still half-open", id, v, b.state)
		}
	}
	// The probe is dial 9: its failure doubles the cool-down, once.
	if b.dialFailed(9, 9, half, 0.5) != dialOpened || b.until != half.Add(2*time.Second) {
		t.Fatalf("the failed probe: cool-down until %v after it, want 2s", b.until.Sub(half))
	}
}

func TestIdleLearnerLearnsTheShortestCloseAndForgets(t *testing.T) {
	t0 := time.Unix(0, 0)
	var l idleLearner
	l.serverClosed(5*time.Millisecond, t0) // too quick to be an idle timeout
	if l.learned(t0) != 0 {
		t.Fatal("learned from a 5ms close")
	}
	l.serverClosed(300*time.Millisecond, t0)
	l.serverClosed(200*time.Millisecond, t0)
	l.serverClosed(250*time.Millisecond, t0)
	if got := l.learned(t0); got != 200*time.Millisecond {
		t.Fatalf("learned %v", got)
	}
	if got := l.retireAfter(t0); got != 180*time.Millisecond {
		t.Fatalf("retire after %v", got)
	}
	if l.learned(t0.Add(learnedFor)) != 0 {
		t.Fatal("not forgotten after learnedFor")
	}
}

func TestJitteredLifetimesSpreadOverTheLastTenPercent(t *testing.T) {
	const max = 100 * time.Second
	lo, hi := max, time.Duration(0)
	for i := 0; i < 1000; i++ {
		d := jitteredLifetime(max, rand.Float64())
		lo, hi = min(lo, d), maxOf(hi, d)
	}
	if lo < 90*time.Second || hi > max || hi-lo < 9*time.Second {
		t.Fatalf("lifetimes in [%v, %v], want spread over [90s, 100s]", lo, hi)
	}
	if jitteredLifetime(0, 0.5) != 0 {
		t.Fatal("no MaxLifetime must mean no lifetime")
	}
}

func maxOf(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

// Connections opened together are retired over the last tenth of
// MaxLifetime, not in one instant: 100 idle connections, watched second by
// second from 89s to 101s of the bubble's fake clock (testing/synctest), with
// the supervisor's own expiry ticks.
func TestRouteRetiresConnectionsOpenedTogetherOverTheJitterWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(t, 100, 100, func(cfg *SupervisorConfig) {
			cfg.Route.MaxLifetime = 100 * time.Second
			cfg.Route.MaxIdleTime = time.Hour
			cfg.ExpiryInterval = 250 * time.Millisecond
		})
		h := p.idleRoute("a", 100)
		time.Sleep(89 * time.Second)
		var retiredAt []time.Duration
		open := p.stats(h).Open
		for s := 89; s <= 101; s++ {
			time.Sleep(time.Second)
			synctest.Wait()
			now := p.stats(h).Open
			for i := 0; i < open-now; i++ {
				retiredAt = append(retiredAt, time.Duration(s+1)*time.Second)
			}
			open = now
		}
		if len(retiredAt) != 100 {
			t.Fatalf("%d of 100 retired by 102s", len(retiredAt))
		}
		if retiredAt[0] < 90*time.Second || retiredAt[99] > 101*time.Second {
			t.Fatalf("retired from %v to %v, want within [90s, 100s] (+ one tick)", retiredAt[0], retiredAt[99])
		}
		seconds := map[time.Duration]int{}
		for _, d := range retiredAt {
			seconds[d]++
		}
		if len(seconds) < 8 {
			t.Fatalf("retirements fell on %d distinct seconds (%v): not spread", len(seconds), seconds)
		}
		if st := p.stats(h); st.ClosedBy[string(route.ReasonLifetime)] != 100 {
			t.Fatalf("closed by %v", st.ClosedBy)
		}
	})
}

func TestRouteRefusesCallersBeyondMaxPending(t *testing.T) {
	p := newPool(t, 1, 8, func(cfg *SupervisorConfig) { cfg.Route.MaxPendingPerRoute = 2 })
	h := p.route("a")
	held := p.lease(h, 1)[0]
	a, b, c := p.ask(h), p.ask(h), p.ask(h)
	if _, err := result(t, c); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third waiter: %v", err)
	}
	if st := p.stats(h); st.Pending != 2 || st.QueueFull != 1 {
		t.Fatalf("stats %+v", st)
	}
	p.release(h, true, held)
	p.release(h, true, p.leased(a))
	p.leased(b)
}

// A route whose dials keep failing refuses callers at once, lets one probe
// out after its cool-down (the bubble's fake clock, testing/synctest), and
// serves again once the probe succeeds.
func TestRouteFailsFastThenProbesAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(t, 4, 8, func(cfg *SupervisorConfig) {
			cfg.Route.FailFast = FailFast{Threshold: 2, Cooldown: time.Second, MaxCooldown: time.Minute}
			cfg.Route.Rand = func() float64 { return 0.5 }
		})
		p.refuse["a"] = errRefused
		h := p.route("a")
		for i := 0; i < 2; i++ {
			if _, err := result(t, p.ask(h)); !errors.Is(err, errRefused) && !errors.Is(err, ErrRouteUnavailable) {
				t.Fatalf("dial %d: %v", i, err)
			}
		}
		dials := p.dialCount()
		for i := 0; i < 10; i++ {
			if _, err := result(t, p.ask(h)); !errors.Is(err, ErrRouteUnavailable) {
				t.Fatalf("while open: %v", err)
			}
		}
		// FailedFast: the ten, and the waiter the second failure refused.
		if st := p.stats(h); st.FailFast != "open" || st.FailedFast != 11 || p.dialCount() != dials {
			t.Fatalf("while open: %+v, dials %d -> %d", st, dials, p.dialCount())
		}
		p.mu.Lock()
		delete(p.refuse, "a")
		gap := make(chan struct{})
		p.dialGap = gap // holds the probe dial
		p.mu.Unlock()
		time.Sleep(1100 * time.Millisecond) // the cool-down passes
		var ts []*wait.Ticket[Lease]
		for i := 0; i < 3; i++ {
			ts = append(ts, p.ask(h))
		}
		synctest.Wait()
		if st := p.stats(h); st.FailFast != "half_open" || st.Pending != 3 || st.Dialing != 1 || p.dialCount()-dials != 1 {
			t.Fatalf("half-open: %+v, %d dials: want one probe for three waiters", st, p.dialCount()-dials)
		}
		p.mu.Lock()
		p.dialGap = nil
		p.mu.Unlock()
		close(gap)
		for _, tk := range ts {
			p.release(h, true, p.leased(tk))
		}
		if st := p.stats(h); st.FailFast != "closed" {
			t.Fatalf("after the probe: %+v", st)
		}
	})
}
