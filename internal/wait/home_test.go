package wait

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// newTestHome starts a Home whose goroutine the test waits for at its end.
func newTestHome(t *testing.T) (h *Home, end func()) {
	t.Helper()
	var wg sync.WaitGroup
	done := make(chan struct{})
	h = NewHome(func(f func()) { wg.Add(1); go func() { defer wg.Done(); f() }() }, done)
	var once sync.Once
	end = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(end)
	return h, end
}

func TestBubbledTellsAReadingInsideABubbleFromOneOutside(t *testing.T) {
	if Bubbled(time.Now()) {
		t.Fatal("a reading outside any bubble is said to be inside one")
	}
	synctest.Test(t, func(t *testing.T) {
		if !Bubbled(time.Now()) {
			t.Fatal("a reading inside a bubble is said to be outside")
		}
	})
}

func TestHomeMadeOutsideHasForeignCallersOnlyInBubbles(t *testing.T) {
	h, _ := newTestHome(t)
	if h.Foreign(time.Now()) {
		t.Fatal("a caller outside any bubble is foreign to a home outside any bubble")
	}
	synctest.Test(t, func(t *testing.T) {
		if !h.Foreign(time.Now()) {
			t.Fatal("a caller in a bubble is not foreign to a home outside it")
		}
		inside, _ := newTestHome(t)
		if inside.Foreign(time.Now()) {
			t.Fatal("a caller in a bubble is foreign to a home made in that bubble")
		}
	})
	var none *Home
	if none.Foreign(time.Now()) {
		t.Fatal("a nil home has a foreign caller")
	}
}

// Work runs on the home goroutine in the order it was queued, work queued
// by work included; once home has ended, Do refuses work.
func TestHomeRunsWorkInOrderAndRefusesItOnceEnded(t *testing.T) {
	h, end := newTestHome(t)
	var got []int
	done := make(chan struct{})
	gate := make(chan struct{})
	h.Do(func() { <-gate }) // home is busy while 1 and 2 are queued
	h.Do(func() { got = append(got, 1); h.Do(func() { got = append(got, 3); close(done) }) })
	h.Do(func() { got = append(got, 2) })
	close(gate)
	<-done
	if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("work ran in the order %v, want [1 2 3]", got)
	}
	end()
	if h.Do(func() { t.Error("work ran after home ended") }) {
		t.Fatal("Do accepted work after home ended")
	}
	if c := h.Chan(); c == nil {
		t.Fatal("Chan after home ended returned no channel")
	}
}

// A ticket whose waiter took its channel from home is decided by a server
// that closes that channel: the waiter wakes.
func TestTicketReadyAtWakesItsWaiterOnDelivery(t *testing.T) {
	h, _ := newTestHome(t)
	var tk Ticket[int]
	ready := tk.ReadyAt(h)
	go tk.Deliver(7)
	<-ready
	if v, err, ok := tk.Result(); !ok || err != nil || v != 7 {
		t.Fatalf("Result() = %v, %v, %v; want 7, nil, true", v, err, ok)
	}
	if tk.ReadyAt(h) != closedCh {
		t.Fatal("a decided ticket's ReadyAt is not the closed channel")
	}
}
