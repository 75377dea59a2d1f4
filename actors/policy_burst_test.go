package actors

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/connactor/connactor/internal/testkit/logrec"
	"github.com/connactor/connactor/internal/wait"
)

const (
	logOpens   = "route fails fast"
	logFailing = "dials to route failing"
	logRecover = "dials to route succeed again"
)

// A burst of 60 callers to a route whose dials are refused, 8 dials at a
// time (MaxConnsPerRoute), on the bubble's fake clock (testing/synctest):
// the 5th failure opens the breaker once, for the cool-down; the 56 callers
// still waiting then get ErrRouteUnavailable and FailedFast counts each of
// them. The dials still in flight count toward nothing when they fail, open
// or half-open: they neither open it again nor fail the caller that waits
// for the probe. Only the probe's failure doubles the cool-down. Each change
// is logged once.
func TestABurstOfRefusedDialsOpensTheBreakerOnceAndOnlyAFailedProbeDoublesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logrec.Recorder{}
		p := newPool(t, 8, 64, func(cfg *SupervisorConfig) {
			cfg.Route.FailFast = FailFast{Threshold: 5, Cooldown: time.Second, MaxCooldown: 30 * time.Second}
			cfg.Route.Rand = func() float64 { return 0.5 } // no jitter
			cfg.Route.Logger = logs.Logger()
		})
		gap := make(chan struct{})
		p.mu.Lock()
		p.refuse["a"] = errRefused
		p.dialGap = gap // dials wait for a value, then are refused
		p.mu.Unlock()
		h := p.route("a")
		var ts []*wait.Ticket[Lease]
		for range 60 {
			ts = append(ts, p.ask(h))
		}
		synctest.Wait()
		for range 5 { // five dials fail: the fifth opens the breaker
			gap <- struct{}{}
		}
		synctest.Wait()
		opened := time.Now()
		refused, unavailable := 0, 0
		for i, tk := range ts {
			switch _, err := result(t, tk); {
			case errors.Is(err, ErrRouteUnavailable):
				unavailable++
			case errors.Is(err, errRefused):
				refused++
			default:
				t.Fatalf("caller %d: %v", i, err)
			}
		}
		st := p.stats(h)
		if refused != 4 || unavailable != 56 {
			t.Fatalf("%d callers got the dial's error and %d ErrRouteUnavailable; want 4 and 56", refused, unavailable)
		}
		if st.FailFast != "open" || st.FailFastUntil.Sub(opened) != time.Second || st.Dialing == 0 {
			t.Fatalf("after the burst: %s until +%v with %d dials in flight; want open for 1s, dials in flight",
				st.FailFast, st.FailFastUntil.Sub(opened), st.Dialing)
		}
		if st.FailedFast != 56 {
			t.Errorf("FailedFast %d; 56 callers got ErrRouteUnavailable", st.FailedFast)
		}

		// The cool-down passes with the burst's dials still in flight: the
		// next caller finds the breaker half-open, and its probe waits for
		// them (one dial at a time while half-open).
		time.Sleep(time.Second)
		dials := p.dialCount()
		probe := p.ask(h)
		synctest.Wait()
		if st := p.stats(h); st.FailFast != "half_open" || st.Pending != 1 || p.dialCount() != dials {
			t.Fatalf("after the cool-down: %s, %d pending, %d new dials; want half_open, 1 waiting, no dial yet",
				st.FailFast, st.Pending, p.dialCount()-dials)
		}
		// The burst's dials fail now, then the probe does.
		p.mu.Lock()
		p.dialGap = nil
		p.mu.Unlock()
		close(gap)
		synctest.Wait()
		probed := time.Now()
		if _, err := result(t, probe); !errors.Is(err, ErrRouteUnavailable) {
			t.Fatalf("the caller behind the failed probe: %v, want ErrRouteUnavailable", err)
		}
		st = p.stats(h)
		if p.dialCount() != dials+1 || st.Dialing != 0 {
			t.Fatalf("%d probes, %d dials in flight; want 1 and 0", p.dialCount()-dials, st.Dialing)
		}
		if st.FailFast != "open" || st.FailFastUntil.Sub(probed) != 2*time.Second {
			t.Fatalf("after the failed probe: %s until +%v; want open for 2s (twice the cool-down, once)",
				st.FailFast, st.FailFastUntil.Sub(probed))
		}
		if st.FailedFast != 57 {
			t.Errorf("FailedFast %d; 57 callers got ErrRouteUnavailable", st.FailedFast)
		}

		// The next probe succeeds and closes it.
		time.Sleep(2 * time.Second)
		p.mu.Lock()
		delete(p.refuse, "a")
		p.mu.Unlock()
		p.release(h, true, p.leased(p.ask(h)))
		if st := p.stats(h); st.FailFast != "closed" {
			t.Fatalf("after a successful probe: %s", st.FailFast)
		}
		if n := len(logs.Containing(logOpens)); n != 2 {
			t.Errorf("%q logged %d times; want 2: the burst's opening and the failed probe's", logOpens, n)
		}
		if n, m := len(logs.Containing(logFailing)), len(logs.Containing(logRecover)); n != 1 || m != 1 {
			t.Errorf("%q logged %d times and %q %d times; want each once", logFailing, n, logRecover, m)
		}
	})
}
