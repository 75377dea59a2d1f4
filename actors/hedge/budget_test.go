package hedge

import (
	"testing"
	"time"
)

func TestBudgetAllowsTheFloorOnAQuietRoute(t *testing.T) {
	var b Budget
	for i := range BudgetFloor {
		if !b.Allow(t0.Add(time.Duration(i)*time.Millisecond), 0.1) {
			t.Fatalf("hedge %d of the floor refused", i+1)
		}
	}
	if b.Allow(t0.Add(time.Second), 0.1) {
		t.Fatal("a hedge past the floor, with no request, was allowed")
	}
}

func TestBudgetFollowsTheRequestsOfTheLastTenSeconds(t *testing.T) {
	type step struct {
		at       time.Duration // after t0
		requests int           // requests counted at this time first
		hedges   int           // then hedges asked for
		allowed  int           // how many of them the budget allows
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"ratio 0.1 of 200 requests adds 20 to the floor of 10", []step{
			{0, 200, 40, 30},
		}},
		{"hedges counted earlier in the window leave less room", []step{
			{0, 100, 15, 15},
			{5 * time.Second, 100, 15, 15}, // 200 requests: 30 in all
			{9 * time.Second, 0, 5, 0},
		}},
		{"a second that leaves the window takes its counts with it", []step{
			{0, 100, 20, 20}, // 100 requests: room for 20
			{9*time.Second + 999*time.Millisecond, 0, 1, 0},
			{10 * time.Second, 0, 10, 10}, // second 0 left: only the floor, and no hedge counted
		}},
		{"a window's worth later, a bucket is reused from zero", []step{
			{0, 1000, 110, 110},
			{20 * time.Second, 0, 11, 10},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Budget
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				for range s.requests {
					b.Request(now)
				}
				allowed := 0
				for range s.hedges {
					if b.Allow(now, 0.1) {
						allowed++
					}
				}
				if allowed != s.allowed {
					r, h := b.Counts(now)
					t.Fatalf("step %d: %d of %d hedges allowed, want %d (window: %d requests, %d hedges)",
						i, allowed, s.hedges, s.allowed, r, h)
				}
			}
		})
	}
}

func TestBudgetCountsOnlyTheHedgesItAllows(t *testing.T) {
	var b Budget
	for range 50 {
		b.Allow(t0, 0)
	}
	if r, h := b.Counts(t0); r != 0 || h != BudgetFloor {
		t.Fatalf("Counts = %d requests, %d hedges; want 0, %d", r, h, BudgetFloor)
	}
}

func BenchmarkBudgetRequest(b *testing.B) {
	var bu Budget
	now := t0
	for b.Loop() {
		now = now.Add(time.Microsecond)
		bu.Request(now)
	}
}

func BenchmarkBudgetAllow(b *testing.B) {
	var bu Budget
	now := t0
	for b.Loop() {
		now = now.Add(time.Microsecond)
		bu.Request(now)
		bu.Allow(now, 0.1)
	}
}
