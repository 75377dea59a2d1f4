package limit

import (
	"testing"
	"time"
)

// maxWait bounds a simulated caller's wait in the route's queue. Without a
// bound, a FIFO queue fed twice what it drains holds each caller until just
// before its deadline, and every request written times out: that collapse is
// what QueueTarget (actors/codel) prevents, not the limit's business.
const maxWait = 200 * time.Millisecond

// upstream is a simulated server that serves k requests at a time, each for
// service(t) from when it starts, and queues the rest in arrival order. It
// keeps serving a request whose caller gave up, as a real server does.
type upstream struct {
	k       int
	service func(t time.Duration) time.Duration
	free    []time.Duration // when each of its k workers is next free
}

// accept takes a request written at t and says when its response head leaves.
func (u *upstream) accept(t time.Duration) time.Duration {
	if u.free == nil {
		u.free = make([]time.Duration, u.k)
	}
	w := 0
	for i := range u.free {
		if u.free[i] < u.free[w] {
			w = i
		}
	}
	start := max(t, u.free[w])
	u.free[w] = start + u.service(start)
	return u.free[w]
}

type request struct {
	arrived, written, done time.Duration
	inFlight               int
}

// simResult is what a simulated run saw, per second of simulated time.
type simResult struct {
	limit  []int           // the limit at the end of each second
	noLoad []time.Duration // the no-load latency at the end of each second
	served []int           // successes (response within the deadline) in each second
	waited time.Duration   // the longest a caller waited in the route's queue
}

// simulate runs a route with lim in front of up for d of simulated time, in
// steps of 1 ms: callers arrive evenly at rate(t) a second, wait in the
// route's FIFO for room under the limit (giving up after maxWait there, as
// with LeaseTimeout: not a sample), and give up deadline after arriving (a
// timeout, if their request is in flight).
func simulate(t *testing.T, lim *Limit, up *upstream, d time.Duration, rate func(time.Duration) float64, deadline time.Duration) simResult {
	t.Helper()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(x time.Duration) time.Time { return base.Add(x) }
	var (
		res      simResult
		queue    []time.Duration
		inFlight []request
		owed     float64
		served   int
	)
	const step = time.Millisecond
	for now := time.Duration(0); now < d; now += step {
		owed += rate(now) * step.Seconds()
		for ; owed >= 1; owed-- {
			queue = append(queue, now)
		}
		kept := inFlight[:0]
		for _, r := range inFlight {
			switch {
			case r.done <= now && r.done <= r.arrived+deadline:
				lim.OnResponse(at(r.written), at(r.done), r.inFlight)
				served++
			case now >= r.arrived+deadline:
				lim.OnTimeout(at(r.written), at(now), r.inFlight)
			default:
				kept = append(kept, r)
			}
		}
		inFlight = kept
		for len(queue) > 0 && now >= queue[0]+maxWait {
			queue = queue[1:]
		}
		for len(queue) > 0 && len(inFlight) < lim.Limit() {
			res.waited = max(res.waited, now-queue[0])
			r := request{arrived: queue[0], written: now, inFlight: len(inFlight) + 1}
			r.done = up.accept(now)
			queue = queue[1:]
			inFlight = append(inFlight, r)
		}
		if (now+step)%time.Second == 0 {
			res.limit = append(res.limit, lim.Limit())
			res.noLoad = append(res.noLoad, lim.NoLoad())
			res.served = append(res.served, served)
			served = 0
		}
	}
	return res
}

func newLimit(t *testing.T, cfg Config) *Limit {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func constant(d time.Duration) func(time.Duration) time.Duration {
	return func(time.Duration) time.Duration { return d }
}

func rate(r float64) func(time.Duration) float64 { return func(time.Duration) float64 { return r } }

// Overloaded at twice its capacity (and, the case where Gradient2's limit
// crept upward, at a modest 1.2 times), an upstream that serves 4 at a time
// ends up holding about 8 of the route's requests, and the limit stays there
// for minutes: it does not creep toward its maximum.
func TestLimitHoldsAboutTwiceWhatTheUpstreamServesAndDoesNotCreep(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate float64
	}{
		{"2x overload", 400},
		{"modest overload (1.2x)", 240},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := newLimit(t, Config{Max: 64})
			up := &upstream{k: 4, service: constant(20 * time.Millisecond)}
			res := simulate(t, lim, up, 5*time.Minute, rate(tc.rate), time.Second)
			for s, l := range res.limit[10:] {
				if l < 4 || l > 10 {
					t.Fatalf("second %d: limit %d, want 4..10 (about 2K = 8); limits %v", s+10, l, res.limit)
				}
			}
			if nl := res.noLoad[len(res.noLoad)-1]; nl != 20*time.Millisecond {
				t.Errorf("no-load latency %v after 5 minutes of overload, want 20ms", nl)
			}
			for s, n := range res.served[10:] {
				if n < 190 {
					t.Fatalf("second %d: %d served, want the upstream's capacity (200/s); served %v", s+10, n, res.served)
				}
			}
		})
	}
}

// When the upstream becomes ten times slower and stays so, the limit falls to
// its floor, lone requests re-measure the no-load latency, and the limit
// grows back to about twice what the upstream serves, now at its new speed;
// when the upstream is fast again, the faster samples lower the no-load
// latency at once and the limit holds about 2K again.
func TestLimitRelearnsTheNoLoadLatencyAfterASlowdownAndAfterRecovery(t *testing.T) {
	lim := newLimit(t, Config{Max: 64})
	slow := func(t time.Duration) time.Duration {
		if t >= 20*time.Second && t < 80*time.Second {
			return 200 * time.Millisecond
		}
		return 20 * time.Millisecond
	}
	up := &upstream{k: 4, service: slow}
	res := simulate(t, lim, up, 120*time.Second, rate(400), time.Second)

	if nl := res.noLoad[30]; nl != 200*time.Millisecond {
		t.Errorf("no-load latency %v 10 s into the slowdown, want 200ms re-measured; %v", nl, res.noLoad)
	}
	for s := 40; s < 80; s++ {
		if l := res.limit[s]; l < 4 || l > 10 {
			t.Fatalf("second %d of the slowdown: limit %d, want about 2K (4..10); %v", s, l, res.limit)
		}
		if n := res.served[s]; n < 18 {
			t.Fatalf("second %d of the slowdown: %d served, want the upstream's capacity (20/s); %v", s, n, res.served)
		}
	}
	if nl := res.noLoad[85]; nl != 20*time.Millisecond {
		t.Errorf("no-load latency %v after the recovery, want 20ms; %v", nl, res.noLoad)
	}
	for s := 90; s < 120; s++ {
		if l := res.limit[s]; l < 4 || l > 10 {
			t.Fatalf("second %d after the recovery: limit %d, want about 2K (4..10); %v", s, l, res.limit)
		}
	}
}

// A route well within the upstream's capacity never holds a request back: the
// limit does not pin concurrency to probe the no-load latency, and it does
// not grow while the route is app-limited.
func TestLimitNeverHoldsBackAHealthyRouteToProbe(t *testing.T) {
	lim := newLimit(t, Config{Max: 64})
	up := &upstream{k: 4, service: constant(20 * time.Millisecond)}
	res := simulate(t, lim, up, 2*time.Minute, rate(100), time.Second)
	if res.waited != 0 {
		t.Errorf("a caller waited %v in the route's queue, want none", res.waited)
	}
	for s, l := range res.limit {
		if l != 8 {
			t.Fatalf("second %d: limit %d, want its initial 8 throughout (app-limited); %v", s, l, res.limit)
		}
	}
}

// An upstream that stops answering makes every request time out at the same
// steady latency: the limit falls to its floor and stays there.
func TestLimitFallsToItsFloorWhenEveryRequestTimesOut(t *testing.T) {
	lim := newLimit(t, Config{Max: 64, Initial: 64})
	up := &upstream{k: 4, service: func(t time.Duration) time.Duration {
		if t >= 5*time.Second {
			return time.Hour
		}
		return 20 * time.Millisecond
	}}
	res := simulate(t, lim, up, time.Minute, rate(400), time.Second)
	for s := 15; s < 60; s++ {
		if l := res.limit[s]; l != 1 {
			t.Fatalf("second %d: limit %d, want its floor 1; %v", s, l, res.limit)
		}
	}
}
