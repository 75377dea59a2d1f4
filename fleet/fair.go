package fleet

import "sort"

// maxMinFair divides budget among demands, max-min fair (water-filling): every
// demand below the fair level is met in full, and what is left is split evenly
// among the larger ones. Integer leftovers go to the larger demands, ties broken
// by index, so the answer is deterministic. The shares sum to min(budget,
// sum(wants)). Negative wants count as zero. It costs O(n log n).
func maxMinFair(budget int, wants []int) []int {
	shares := make([]int, len(wants))
	if budget <= 0 || len(wants) == 0 {
		return shares
	}
	order := make([]int, len(wants))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return wants[order[a]] < wants[order[b]] })
	left := budget
	for n, i := range order {
		fair := left / (len(order) - n)
		shares[i] = min(max(wants[i], 0), fair)
		left -= shares[i]
	}
	return shares
}
