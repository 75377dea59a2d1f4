package limit

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// sample is one request the route reports: written at written ms, answered
// (or given up, with timeout) at at ms, with inFlight of the route's requests
// in flight when it was written; repeat > 1 repeats it, each copy shifted by
// every ms.
type sample struct {
	written, at, inFlight int
	timeout               bool
	repeat, every         int
}

func (s sample) feed(l *Limit) {
	for i := range max(1, s.repeat) {
		w, a := ms(s.written+i*s.every), ms(s.at+i*s.every)
		if s.timeout {
			l.OnTimeout(w, a, s.inFlight)
		} else {
			l.OnResponse(w, a, s.inFlight)
		}
	}
}

// learned20ms is a lone request answered in 20 ms at t0: the no-load latency.
var learned20ms = sample{written: 0, at: 20, inFlight: 1}

func TestLimitFollowsItsRules(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cfg        Config
		samples    []sample
		wantLimit  int
		wantNoLoad time.Duration
	}{{
		name:      "requests written with the limit full and answered near the no-load latency raise it by one a round",
		cfg:       Config{Max: 64, Initial: 8},
		samples:   []sample{learned20ms, {written: 100, at: 130, inFlight: 8, repeat: 10, every: 1}},
		wantLimit: 9, wantNoLoad: 20 * time.Millisecond,
	}, {
		name:      "latency more than Slack above a fast upstream's no-load latency lowers it",
		cfg:       Config{Max: 64, Initial: 16, Slack: 5 * time.Millisecond},
		samples:   []sample{learned20ms, {written: 100, at: 146, inFlight: 16}},
		wantLimit: 13, wantNoLoad: 20 * time.Millisecond,
	}, {
		name:      "app-limited requests never raise it, however fast",
		cfg:       Config{Max: 64, Initial: 8},
		samples:   []sample{learned20ms, {written: 100, at: 120, inFlight: 7, repeat: 1000, every: 1}},
		wantLimit: 8, wantNoLoad: 20 * time.Millisecond,
	}, {
		name:      "latency ten times the no-load latency halves it, once per round",
		cfg:       Config{Max: 64, Initial: 16},
		samples:   []sample{learned20ms, {written: 100, at: 300, inFlight: 16, repeat: 16, every: 1}},
		wantLimit: 8, wantNoLoad: 20 * time.Millisecond,
	}, {
		name:      "latency two and a half times the no-load latency lowers it by a fifth",
		cfg:       Config{Max: 64, Initial: 20},
		samples:   []sample{learned20ms, {written: 100, at: 150, inFlight: 20}},
		wantLimit: 16, wantNoLoad: 20 * time.Millisecond,
	}, {
		name: "a new round (requests written after the last decrease) lowers it again",
		cfg:  Config{Max: 64, Initial: 16},
		samples: []sample{learned20ms, {written: 100, at: 300, inFlight: 16},
			{written: 301, at: 501, inFlight: 8}},
		wantLimit: 4, wantNoLoad: 20 * time.Millisecond,
	}, {
		// Gradient2 saw steady latencies in requests that all timed out and
		// raised its limit to the maximum.
		name: "requests that all time out at the same steady latency bring it to its floor",
		cfg:  Config{Max: 64, Initial: 16},
		samples: []sample{learned20ms,
			{written: 100, at: 1100, inFlight: 16, timeout: true, repeat: 6, every: 1001}},
		wantLimit: 1, wantNoLoad: 20 * time.Millisecond,
	}, {
		name: "a wave of timeouts of one round halves it once",
		cfg:  Config{Max: 64, Initial: 16},
		samples: []sample{learned20ms,
			{written: 100, at: 1100, inFlight: 16, timeout: true, repeat: 16, every: 1}},
		wantLimit: 8, wantNoLoad: 20 * time.Millisecond,
	}, {
		// Drops recorded with a latency of about 0 pulled Netflix's
		// estimates toward zero.
		name: "a caller that gave up at once teaches nothing: no latency, no decrease",
		cfg:  Config{Max: 64, Initial: 16},
		samples: []sample{learned20ms,
			{written: 100, at: 100, inFlight: 16, timeout: true},
			{written: 200, at: 201, inFlight: 16, timeout: true},
			{written: 300, at: 300, inFlight: 1}},
		wantLimit: 16, wantNoLoad: 20 * time.Millisecond,
	}, {
		name:      "a faster sample lowers the no-load latency at once, even from a busy route",
		cfg:       Config{Max: 64},
		samples:   []sample{learned20ms, {written: 100, at: 112, inFlight: 8}},
		wantLimit: 8, wantNoLoad: 12 * time.Millisecond,
	}, {
		name: "lone requests slower for a whole window re-measure the no-load latency",
		cfg:  Config{Max: 64, Initial: 1},
		samples: []sample{learned20ms,
			{written: 100, at: 300, inFlight: 1, repeat: 30, every: 200}},
		wantLimit: 2, wantNoLoad: 200 * time.Millisecond,
	}, {
		// A minimum taken from busy requests would follow the queueing the
		// route itself causes upstream, window after window.
		name: "busy requests never raise the no-load latency, however long they last",
		cfg:  Config{Max: 64, Initial: 8},
		samples: []sample{learned20ms,
			{written: 100, at: 140, inFlight: 4, repeat: 100, every: 100}},
		wantLimit: 8, wantNoLoad: 20 * time.Millisecond,
	}, {
		// Envoy's minimum was skewed by requests that spanned the start of
		// its measurement window.
		name: "a request written before the window began does not count toward its minimum",
		cfg:  Config{Max: 64},
		samples: []sample{learned20ms,
			{written: 2070, at: 2100, inFlight: 4}, // the next window begins
			{written: 2000, at: 3600, inFlight: 1},
			{written: 4000, at: 5700, inFlight: 4}}, // and ends
		wantLimit: 2, wantNoLoad: 20 * time.Millisecond,
	}, {
		name: "the window's own lone requests do count",
		cfg:  Config{Max: 64},
		samples: []sample{learned20ms,
			{written: 2070, at: 2100, inFlight: 4},
			{written: 2110, at: 3710, inFlight: 1},
			{written: 4000, at: 5700, inFlight: 4}},
		wantLimit: 4, wantNoLoad: 1600 * time.Millisecond,
	}, {
		// Envoy's one setting was both the probe's concurrency and the floor:
		// set high, the probe measured queueing and the limit never recovered.
		name: "a floor above 1 keeps the no-load latency through a slowdown",
		cfg:  Config{Max: 64, Min: 8, Initial: 16},
		samples: []sample{learned20ms,
			{written: 100, at: 300, inFlight: 8, repeat: 50, every: 201}},
		wantLimit: 8, wantNoLoad: 20 * time.Millisecond,
	}, {
		name:      "it never exceeds its maximum",
		cfg:       Config{Max: 4, Initial: 4},
		samples:   []sample{learned20ms, {written: 100, at: 120, inFlight: 4, repeat: 100, every: 1}},
		wantLimit: 4, wantNoLoad: 20 * time.Millisecond,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimit(t, tc.cfg)
			for _, s := range tc.samples {
				s.feed(l)
			}
			if got := l.Limit(); got != tc.wantLimit {
				t.Errorf("Limit() = %d, want %d", got, tc.wantLimit)
			}
			if got := l.NoLoad(); got != tc.wantNoLoad {
				t.Errorf("NoLoad() = %v, want %v", got, tc.wantNoLoad)
			}
		})
	}
}

// With a floor of 8 over an upstream that serves 8 at a time, a long
// slowdown holds the limit at its floor, and the limit comes back to about
// twice what the upstream serves when it recovers.
func TestLimitWithAHighFloorRecoversAfterASlowdown(t *testing.T) {
	lim := newLimit(t, Config{Max: 64, Min: 8})
	up := &upstream{k: 8, service: func(t time.Duration) time.Duration {
		if t >= 10*time.Second && t < 40*time.Second {
			return 200 * time.Millisecond
		}
		return 20 * time.Millisecond
	}}
	res := simulate(t, lim, up, 60*time.Second, rate(800), time.Second)
	for s := 15; s < 40; s++ {
		if l := res.limit[s]; l != 8 {
			t.Fatalf("second %d of the slowdown: limit %d, want the floor 8; %v", s, l, res.limit)
		}
	}
	for s := 45; s < 60; s++ {
		if l := res.limit[s]; l < 12 || l > 20 {
			t.Fatalf("second %d after the slowdown: limit %d, want about 16; %v", s, l, res.limit)
		}
	}
}

func TestNewRefusesABadConfigAndFillsDefaults(t *testing.T) {
	for _, cfg := range []Config{
		{}, {Max: -1}, {Max: 4, Min: 5}, {Max: 4, Min: -1}, {Max: 4, Initial: 5},
		{Max: 4, Tolerance: 0.5}, {Max: 4, Window: -time.Second},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	for _, tc := range []struct {
		cfg  Config
		want int
	}{{Config{Max: 64}, 8}, {Config{Max: 4}, 4}, {Config{Max: 64, Min: 10}, 10}, {Config{Max: 64, Initial: 30}, 30}} {
		if got := newLimit(t, tc.cfg).Limit(); got != tc.want {
			t.Errorf("New(%+v).Limit() = %d, want %d", tc.cfg, got, tc.want)
		}
	}
}

// The route calls OnResponse once per response head: it costs a few
// nanoseconds and allocates nothing.
func BenchmarkOnResponse(b *testing.B) {
	l, _ := New(Config{Max: 64})
	b.ReportAllocs()
	now := t0
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Millisecond)
		l.OnResponse(now.Add(-time.Duration(20+i%25)*time.Millisecond), now, 1+i%10)
	}
}

func BenchmarkOnTimeout(b *testing.B) {
	l, _ := New(Config{Max: 64})
	l.OnResponse(t0, t0.Add(20*time.Millisecond), 1)
	b.ReportAllocs()
	now := t0
	for b.Loop() {
		now = now.Add(time.Millisecond)
		l.OnTimeout(now.Add(-time.Second), now, 8)
	}
}

// A fast upstream (50 µs alone) whose latency grows to 2 ms with a few dozen
// requests in flight is not queueing anything worth a lower limit: held to
// a handful of requests by the ratio alone, a route got a third of a fixed
// limit's throughput in connbench's healthy cells.
func TestAFastUpstreamsLatencyWithinSlackOfItsNoLoadLatencyRaisesTheLimit(t *testing.T) {
	l, err := New(Config{Max: 64, Initial: 8})
	if err != nil {
		t.Fatal(err)
	}
	us := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Microsecond) }
	l.OnResponse(us(0), us(50), 1)
	at := 1000
	for range 200 {
		in := l.Limit()
		l.OnResponse(us(at), us(at+2000), in) // 40 times the no-load latency, 1.95 ms above it
		at += 10
	}
	if got := l.Limit(); got <= 8 {
		t.Fatalf("limit %d after 200 full rounds at 2 ms, want it raised above 8", got)
	}
	if got := l.NoLoad(); got != 50*time.Microsecond {
		t.Fatalf("no-load latency %v, want 50µs", got)
	}
	l.OnResponse(us(at), us(at+20000), l.Limit()) // 20 ms: past Slack, a real queue
	if got := l.Limit(); got > 16 {
		t.Fatalf("limit %d after a 20 ms response, want it halved", got)
	}
}
