package hedge

import (
	"testing"
	"time"
)

func TestDelayIsFixedOrTheRoutesPercentile(t *testing.T) {
	var s Sketch
	p := Policy{}.WithDefaults()
	if d, ok := p.DelayAt(&s, t0); ok {
		t.Fatalf("no samples: delay %v, want none", d)
	}
	for i := range 100 {
		s.Add(t0, time.Duration(i+1)*time.Millisecond)
	}
	if d, ok := p.DelayAt(&s, t0); !ok || relErr(d, 95*time.Millisecond) > 1.0/16 {
		t.Fatalf("p95 of 1..100 ms: delay %v (%v), want about 95ms", d, ok)
	}
	p.Delay = 3 * time.Millisecond
	if d, ok := p.DelayAt(&Sketch{}, t0); !ok || d != 3*time.Millisecond {
		t.Fatalf("fixed delay: %v (%v), want 3ms", d, ok)
	}
}

func TestDecideSendsADueAttemptOnlyWithRoomAndBudget(t *testing.T) {
	const delay = 10 * time.Millisecond
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	spent := func() *Budget { // a budget with no room left
		var b Budget
		for b.Allow(t0, 0.1) {
		}
		return &b
	}
	for _, tc := range []struct {
		name     string
		policy   Policy
		noDelay  bool // the route has not measured its latency yet
		attempts Attempts
		now      time.Time
		room     bool
		budget   *Budget
		verdict  Verdict
		at       time.Time
	}{
		{"before the delay, wait for it", Policy{}, false, Attempts{1, ms(0)}, ms(4), true, nil, Wait, ms(10)},
		{"the delay counts from the last write", Policy{MaxAttempts: 3}, false, Attempts{2, ms(12)}, ms(15), true, nil, Wait, ms(22)},
		{"at the delay, send", Policy{}, false, Attempts{1, ms(0)}, ms(10), true, nil, Send, ms(10)},
		{"past the delay, send", Policy{}, false, Attempts{1, ms(0)}, ms(31), true, nil, Send, ms(31)},
		{"due without room: try again a delay later", Policy{}, false, Attempts{1, ms(0)}, ms(10), false, nil, Wait, ms(20)},
		{"due past the budget: try again a delay later", Policy{}, false, Attempts{1, ms(0)}, ms(10), true, spent(), Wait, ms(20)},
		{"all attempts made", Policy{}, false, Attempts{2, ms(0)}, ms(50), true, nil, Done, time.Time{}},
		{"one attempt in all never hedges", Policy{MaxAttempts: 1}, false, Attempts{1, ms(0)}, ms(50), true, nil, Done, time.Time{}},
		{"the third of three", Policy{MaxAttempts: 3}, false, Attempts{2, ms(10)}, ms(20), true, nil, Send, ms(20)},
		{"nothing written yet", Policy{}, false, Attempts{0, time.Time{}}, ms(50), true, nil, Done, time.Time{}},
		{"no delay measured", Policy{}, true, Attempts{1, ms(0)}, ms(50), true, nil, Done, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.budget
			if b == nil {
				b = &Budget{}
			}
			_, before := b.Counts(tc.now)
			v, at := Decide(tc.policy.WithDefaults(), delay, !tc.noDelay, tc.attempts, tc.now, func() bool { return tc.room }, b)
			if v != tc.verdict || !at.Equal(tc.at) {
				t.Fatalf("Decide = %v at %v, want %v at %v", v, at.Sub(t0), tc.verdict, tc.at.Sub(t0))
			}
			_, after := b.Counts(tc.now)
			if want := before + map[bool]int{true: 1}[v == Send]; after != want {
				t.Fatalf("budget counted %d hedges, want %d", after, want)
			}
		})
	}
}
