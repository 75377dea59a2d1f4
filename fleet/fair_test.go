package fleet

import (
	"slices"
	"testing"
)

func TestMaxMinFairMeetsSmallDemandsAndSplitsTheRest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget int
		wants  []int
		want   []int
	}{
		{"nothing to divide", 0, []int{3, 4}, []int{0, 0}},
		{"no demand", 10, nil, []int{}},
		{"all fit", 10, []int{2, 3}, []int{2, 3}},
		{"even split", 9, []int{10, 10, 10}, []int{3, 3, 3}},
		{"leftover to the last of equals", 10, []int{10, 10, 10}, []int{3, 3, 4}},
		{"small demand met, rest split", 10, []int{1, 100, 100}, []int{1, 4, 5}},
		{"order does not matter", 10, []int{100, 1, 100}, []int{4, 1, 5}},
		{"idle node gets nothing", 10, []int{0, 20}, []int{0, 10}},
		{"negative wants count as zero", 5, []int{-3, 9}, []int{0, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := maxMinFair(tc.budget, tc.wants)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("maxMinFair(%d, %v) = %v, want %v", tc.budget, tc.wants, got, tc.want)
			}
		})
	}
}

func FuzzMaxMinFairNeverExceedsBudgetOrDemand(f *testing.F) {
	f.Add(10, []byte{1, 200, 3})
	f.Add(0, []byte{})
	f.Add(255, []byte{255, 255, 255, 0})
	f.Fuzz(func(t *testing.T, budget int, raw []byte) {
		budget = max(0, budget%1000)
		wants := make([]int, len(raw))
		sumWant := 0
		for i, b := range raw {
			wants[i] = int(b)
			sumWant += int(b)
		}
		got := maxMinFair(budget, wants)
		sum := 0
		for i, g := range got {
			if g < 0 || g > wants[i] {
				t.Fatalf("share %d of want %d", g, wants[i])
			}
			sum += g
		}
		if sum != min(budget, sumWant) {
			t.Fatalf("shares sum to %d, want min(%d, %d)", sum, budget, sumWant)
		}
		// Max-min fair: a node short of its want has at least as much as any
		// other node, less one for the integer leftover.
		for i := range got {
			if got[i] == wants[i] {
				continue
			}
			for j := range got {
				if got[j] > got[i]+1 {
					t.Fatalf("node %d is short (%d of %d) while node %d has %d", i, got[i], wants[i], j, got[j])
				}
			}
		}
	})
}
