package actors

import (
	"fmt"
	"strings"
	"testing"
)

func contents(q *WaitQueue[uint64, string]) string {
	var parts []string
	q.Each(func(id uint64, v string) { parts = append(parts, fmt.Sprintf("%d:%s", id, v)) })
	return strings.Join(parts, " ")
}

func TestWaitQueueIsFIFOWithRemovalAnywhere(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove []uint64
		want   string
	}{
		{"nothing removed", nil, "1:a 2:b 3:c 4:d"},
		{"head removed", []uint64{1}, "2:b 3:c 4:d"},
		{"middle removed", []uint64{3}, "1:a 2:b 4:d"},
		{"tail removed", []uint64{4}, "1:a 2:b 3:c"},
		{"all removed", []uint64{2, 4, 1, 3}, ""},
		{"unknown id ignored", []uint64{9}, "1:a 2:b 3:c 4:d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q WaitQueue[uint64, string]
			for i, v := range []string{"a", "b", "c", "d"} {
				q.Push(uint64(i+1), v)
			}
			for _, id := range tc.remove {
				_, ok := q.Remove(id)
				if ok != (id <= 4) {
					t.Fatalf("Remove(%d) = %v", id, ok)
				}
			}
			if got := contents(&q); got != tc.want {
				t.Fatalf("queue %q, want %q", got, tc.want)
			}
			if q.Len() != len(strings.Fields(tc.want)) {
				t.Fatalf("Len %d for %q", q.Len(), tc.want)
			}
		})
	}
}

func TestWaitQueuePopsInArrivalOrderAndIsReusable(t *testing.T) {
	var q WaitQueue[uint64, int]
	for round := 0; round < 3; round++ {
		for i := 0; i < 5; i++ {
			q.Push(uint64(round*10+i), i)
		}
		for i := 0; i < 5; i++ {
			if id, _, ok := q.Peek(); !ok || id != uint64(round*10+i) {
				t.Fatalf("Peek = %d, %v", id, ok)
			}
			id, v, ok := q.Pop()
			if !ok || v != i || id != uint64(round*10+i) {
				t.Fatalf("round %d: Pop = %d %d %v", round, id, v, ok)
			}
		}
		if _, _, ok := q.Pop(); ok || q.Len() != 0 {
			t.Fatal("queue not empty")
		}
	}
}

func TestWaitQueueFindReturnsTheOldestMatch(t *testing.T) {
	var q WaitQueue[uint64, int]
	for i := 1; i <= 6; i++ {
		q.Push(uint64(i), i)
	}
	id, v, ok := q.Find(func(v int) bool { return v%3 == 0 })
	if !ok || id != 3 || v != 3 {
		t.Fatalf("Find = %d %d %v", id, v, ok)
	}
	if _, _, ok := q.Find(func(v int) bool { return v > 10 }); ok {
		t.Fatal("Find matched nothing but said ok")
	}
}

func TestWaitQueueRefusesADuplicateID(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "actors: internal error") {
			t.Fatalf("recover() = %v", r)
		}
	}()
	var q WaitQueue[uint64, int]
	q.Push(1, 1)
	q.Push(1, 2)
}

func TestWaitQueueGivesMemoryBackAfterALargeBacklog(t *testing.T) {
	var q WaitQueue[uint64, int]
	for i := 0; i < 100_000; i++ {
		q.Push(uint64(i), i)
	}
	for i := 0; i < 100_000; i += 2 {
		q.Remove(uint64(i))
	}
	for q.Len() > 0 {
		q.Pop()
	}
	if q.byID != nil || q.free != nil {
		t.Fatal("an emptied large queue kept its map and free list")
	}
	q.Push(1, 1)
	if _, v, ok := q.Pop(); !ok || v != 1 {
		t.Fatal("queue unusable after shrinking")
	}
}
