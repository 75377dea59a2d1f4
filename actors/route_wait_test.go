package actors

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/internal/testkit/logrec"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

const logLongWaits = "callers wait long for a connection"

// settleDeadLetters lets protoactor's dead-letter throttle end inside a
// synctest bubble: a message to a stopped actor (a dial's answer, after the
// pool closed) starts a goroutine that waits a second, which the bubble's
// clock passes only while the test's own goroutine runs. Call it before
// newPool: cleanups run last in, first out.
func settleDeadLetters(t *testing.T) {
	t.Cleanup(func() { time.Sleep(2 * time.Second) })
}

// With one connection and two callers, on the bubble's fake clock
// (testing/synctest): a wait of 0.9 s is not warned of, a wait of 1.2 s is,
// whatever else the route receives meanwhile (nothing here), and the next
// long wait only once a minute has passed since.
func TestEveryWaitOverLongWaitIsWarnedOfAtMostOnceAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &logrec.Recorder{}
		p := newPool(t, 1, 8, func(cfg *SupervisorConfig) { cfg.Route.Logger = logs.Logger() })
		h := p.route("a")
		waitFor := func(d time.Duration) {
			held := p.leased(p.ask(h))
			next := p.ask(h)
			synctest.Wait()
			time.Sleep(d)
			p.release(h, true, held)
			p.release(h, true, p.leased(next))
			synctest.Wait()
		}
		warned := func() int { return len(logs.Containing(logLongWaits + ": every connection of the route is in use")) }
		for _, step := range []struct {
			sleep, wait time.Duration
			want        int
		}{
			{wait: 900 * time.Millisecond, want: 0},
			{wait: 1200 * time.Millisecond, want: 1},
			{wait: 1700 * time.Millisecond, want: 1}, // within a minute of the last warning
			{sleep: time.Minute, wait: 1200 * time.Millisecond, want: 2},
		} {
			time.Sleep(step.sleep)
			waitFor(step.wait)
			if n := warned(); n != step.want {
				t.Fatalf("after a wait of %v: %d warnings naming MaxConnsPerRoute, want %d (logged: %q)",
					step.wait, n, step.want, logs.All())
			}
		}
		if n := len(logs.Having("waits_for", "MaxConnsPerRoute")); n != 2 {
			t.Fatalf("%d warnings say waits_for=MaxConnsPerRoute, want 2 (logged: %+v)", n, logs.All())
		}
	})
}

// The warning names what the oldest caller waits for: the route's limit,
// dials in flight, the fail-fast probe, MaxConnsTotal, MaxConnsPerHost, or
// the fleet share (here a fleet budget whose keeper never grants one: the
// route waits for its share with nothing leased).
func TestALongWaitWarningNamesWhatTheCallerWaitsFor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause string
		opt   poolOpt
		setup func(p *pool) // leaves a caller waiting
	}{
		{name: "the route's limit", cause: "MaxConnsPerRoute", setup: func(p *pool) {
			h := p.route("a")
			p.lease(h, 2)
			p.ask(h)
		}},
		{name: "dials in flight", cause: "dials in flight", setup: func(p *pool) {
			p.mu.Lock()
			p.dialGap = make(chan struct{})
			p.mu.Unlock()
			p.ask(p.route("a"))
		}},
		{name: "the fail-fast probe", cause: "fail-fast probe",
			opt: func(cfg *SupervisorConfig) {
				cfg.Route.FailFast = FailFast{Threshold: 1, Cooldown: time.Second, MaxCooldown: time.Minute}
				cfg.Route.Rand = func() float64 { return 0.5 }
			},
			setup: func(p *pool) {
				h := p.route("a")
				p.mu.Lock()
				p.refuse["a"] = errRefused
				p.mu.Unlock()
				result(p.tb, p.ask(h)) // refused: the breaker opens for 1s
				time.Sleep(time.Second)
				p.mu.Lock()
				delete(p.refuse, "a")
				p.dialGap = make(chan struct{}) // holds the probe
				p.mu.Unlock()
				p.ask(h)
			}},
		{name: "MaxConnsTotal", cause: "MaxConnsTotal",
			opt: func(cfg *SupervisorConfig) { cfg.MaxConnsTotal = 1 },
			setup: func(p *pool) {
				p.lease(p.route("a"), 1)
				p.ask(p.route("b"))
			}},
		{name: "MaxConnsPerHost", cause: "MaxConnsPerHost",
			opt: func(cfg *SupervisorConfig) { cfg.MaxConnsPerHost = 1 },
			setup: func(p *pool) {
				p.lease(p.route("a"), 1)
				t := &wait.Ticket[*routeHandle]{}
				other := route.Key{Scheme: "http", Host: "a", Port: "80", TLS: "another configuration"}
				p.sys.Root.Send(p.sup, &RouteRequest{Key: other, Ticket: t})
				h, err := result(p.tb, t)
				if err != nil {
					p.tb.Fatal(err)
				}
				p.ask(h)
			}},
		{name: "the fleet share", cause: "fleet share",
			opt: func(cfg *SupervisorConfig) {
				cfg.Fleet = actor.NewPID("nonhost", "a keeper that never answers")
				cfg.FleetInterval = time.Hour
			},
			setup: func(p *pool) { p.ask(p.route("a")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				settleDeadLetters(t)
				logs := &logrec.Recorder{}
				p := newPool(t, 2, 8, func(cfg *SupervisorConfig) {
					cfg.Logger, cfg.Route.Logger = logs.Logger(), logs.Logger()
					if tc.opt != nil {
						tc.opt(cfg)
					}
				})
				tc.setup(p)
				synctest.Wait()
				time.Sleep(LongWait + 100*time.Millisecond)
				synctest.Wait()
				if n, all := len(logs.Having("waits_for", tc.cause)), len(logs.Containing(logLongWaits)); n != 1 || all != 1 {
					t.Fatalf("%d long-wait warnings, %d of them naming %q; want one (logged: %+v)", all, n, tc.cause, logs.All())
				}
			})
		})
	}
}
