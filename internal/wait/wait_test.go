package wait

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTicketOutcomes(t *testing.T) {
	errNo := errors.New("no")
	for _, tc := range []struct {
		name         string
		run          func(*Ticket[int]) (deliverOK, rejectOK, cancelGot bool)
		wantV        int
		wantErr      error
		wantOK       bool
		wantReturned bool
		wantDeliver  bool // whether Deliver reported the waiter took the value
		wantReject   bool
	}{
		{"delivered", func(tk *Ticket[int]) (bool, bool, bool) {
			return tk.Deliver(7), tk.Reject(errNo), false
		}, 7, nil, true, false, true, false},
		{"rejected", func(tk *Ticket[int]) (bool, bool, bool) {
			r := tk.Reject(errNo)
			return tk.Deliver(7), r, false
		}, 0, errNo, true, false, false, true},
		{"cancelled before delivery keeps the value with the server", func(tk *Ticket[int]) (bool, bool, bool) {
			c := tk.Cancel()
			return tk.Deliver(7), tk.Reject(errNo), c
		}, 0, nil, false, false, false, false},
		{"cancelled after delivery returns the value", func(tk *Ticket[int]) (bool, bool, bool) {
			d := tk.Deliver(7)
			return d, tk.Reject(errNo), tk.Cancel()
		}, 0, nil, false, true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tk Ticket[int]
			deliverOK, rejectOK, cancelGot := tc.run(&tk)
			select {
			case <-tk.Ready():
			default:
				t.Fatal("decided ticket not ready")
			}
			v, err, ok := tk.Result()
			if v != tc.wantV || err != tc.wantErr || ok != tc.wantOK {
				t.Fatalf("Result = %v, %v, %v; want %v, %v, %v", v, err, ok, tc.wantV, tc.wantErr, tc.wantOK)
			}
			if cancelGot != tc.wantReturned {
				t.Fatalf("Cancel reported delivered=%v, want %v", cancelGot, tc.wantReturned)
			}
			rv, rok := tk.Returned()
			if rok != tc.wantReturned || (rok && rv != 7) {
				t.Fatalf("Returned = %v, %v", rv, rok)
			}
			if _, again := tk.Returned(); again {
				t.Fatal("a returned value was handed back twice")
			}
			if deliverOK != tc.wantDeliver || rejectOK != tc.wantReject {
				t.Fatalf("Deliver reported %v, Reject %v; want %v, %v", deliverOK, rejectOK, tc.wantDeliver, tc.wantReject)
			}
		})
	}
}

func TestTicketReadyWakesABlockedWaiter(t *testing.T) {
	var tk Ticket[string]
	ready := tk.Ready()
	done := make(chan string)
	go func() {
		<-ready
		v, _, _ := tk.Result()
		done <- v
	}()
	tk.Deliver("x")
	if v := <-done; v != "x" {
		t.Fatalf("got %q", v)
	}
}

// Every value offered is owned by exactly one side in the end, whatever the
// interleaving of Deliver and Cancel.
func TestTicketRaceHasExactlyOneOwner(t *testing.T) {
	for i := 0; i < 2000; i++ {
		var tk Ticket[int]
		var serverKept, waiterUsed, returnedBack atomic.Int32
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if !tk.Deliver(1) {
				serverKept.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				<-tk.Ready()
				if _, _, ok := tk.Result(); ok {
					waiterUsed.Add(1)
					return
				}
			}
			if tk.Cancel() {
				if _, ok := tk.Returned(); ok {
					returnedBack.Add(1)
				}
			}
		}()
		wg.Wait()
		if n := serverKept.Load() + waiterUsed.Load() + returnedBack.Load(); n != 1 {
			t.Fatalf("round %d: value owned %d times (kept %d used %d returned %d)", i, n,
				serverKept.Load(), waiterUsed.Load(), returnedBack.Load())
		}
	}
}

func TestSemaphoreServesWaitersInArrivalOrder(t *testing.T) {
	s := NewSemaphore(1)
	if !s.TryAcquire() {
		t.Fatal("first acquire failed")
	}
	tks := make([]*Ticket[struct{}], 5)
	for i := range tks {
		tks[i] = &Ticket[struct{}]{}
		s.Enqueue(tks[i])
	}
	if s.TryAcquire() {
		t.Fatal("TryAcquire jumped the queue")
	}
	s.Cancel(tks[2]) // leaves the queue
	for _, want := range []int{0, 1, 3, 4} {
		s.Release()
		for i, tk := range tks {
			if _, _, ok := tk.Result(); ok != (i <= want && i != 2) {
				t.Fatalf("after release for %d: ticket %d served=%v", want, i, ok)
			}
		}
	}
	if held, waiting := s.Held(); held != 1 || waiting != 0 {
		t.Fatalf("held %d waiting %d", held, waiting)
	}
}

func TestSemaphoreCancelAfterServiceGivesTheUnitBack(t *testing.T) {
	s := NewSemaphore(1)
	s.TryAcquire()
	a, b := &Ticket[struct{}]{}, &Ticket[struct{}]{}
	s.Enqueue(a)
	s.Enqueue(b)
	s.Release() // a is served ...
	s.Cancel(a) // ... and gives up: its unit goes to b
	if _, _, ok := b.Result(); !ok {
		t.Fatal("b not served with a's returned unit")
	}
	if held, _ := s.Held(); held != 1 {
		t.Fatalf("held %d", held)
	}
}

func TestSemaphoreNeverExceedsItsSizeUnderHammering(t *testing.T) {
	const size, workers, rounds = 3, 32, 300
	s := NewSemaphore(size)
	var in, peak atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				if !s.TryAcquire() {
					tk := &Ticket[struct{}]{}
					s.Enqueue(tk)
					if (w+i)%7 == 0 {
						s.Cancel(tk) // gives up at once, served or not
						continue
					}
					<-tk.Ready()
				}
				n := in.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				in.Add(-1)
				s.Release()
			}
		}(w)
	}
	wg.Wait()
	if peak.Load() > size {
		t.Fatalf("peak %d > size %d", peak.Load(), size)
	}
	if held, waiting := s.Held(); held != 0 || waiting != 0 {
		t.Fatalf("after the hammer: held %d waiting %d", held, waiting)
	}
	select {
	case <-s.Drained():
	default:
		t.Fatal("Drained not closed with nothing held")
	}
}

func TestSemaphoreDrainedClosesWhenTheLastUnitIsReleased(t *testing.T) {
	s := NewSemaphore(2)
	s.TryAcquire()
	s.TryAcquire()
	d := s.Drained()
	s.Release()
	select {
	case <-d:
		t.Fatal("drained with a unit held")
	default:
	}
	s.Release()
	<-d
}

// A waiter whose wait already cancelled the ticket (a delivery crossed it)
// still gives the unit back through Semaphore.Cancel.
func TestSemaphoreCancelOfAnAlreadyCancelledTicketGivesTheUnitBack(t *testing.T) {
	s := NewSemaphore(1)
	s.TryAcquire()
	tk := &Ticket[struct{}]{}
	s.Enqueue(tk)
	s.Release()  // delivered to tk ...
	tk.Cancel()  // ... the wait gives up ...
	s.Cancel(tk) // ... and the waiter cancels with the semaphore
	if held, waiting := s.Held(); held != 0 || waiting != 0 {
		t.Fatalf("held %d waiting %d", held, waiting)
	}
}

// Close rejects every queued waiter with its error, and every later Enqueue;
// units held stay held, and their Release serves nobody.
func TestSemaphoreCloseRejectsQueuedAndLaterWaiters(t *testing.T) {
	errClosed := errors.New("closed")
	s := NewSemaphore(1)
	if !s.TryAcquire() {
		t.Fatal("first acquire failed")
	}
	queued := []*Ticket[struct{}]{{}, {}, {}}
	for _, tk := range queued {
		s.Enqueue(tk)
	}
	gaveUp := &Ticket[struct{}]{}
	s.Enqueue(gaveUp)
	gaveUp.Cancel()
	s.Close(errClosed)
	s.Close(errors.New("again")) // nothing more
	for i, tk := range queued {
		select {
		case <-tk.Ready():
		default:
			t.Fatalf("waiter %d not answered by Close", i)
		}
		if _, err, ok := tk.Result(); !ok || err != errClosed {
			t.Fatalf("waiter %d: %v, %v", i, err, ok)
		}
	}
	later := &Ticket[struct{}]{}
	s.Enqueue(later)
	if _, err, ok := later.Result(); !ok || err != errClosed {
		t.Fatalf("a waiter after Close: %v, %v", err, ok)
	}
	if held, waiting := s.Held(); held != 1 || waiting != 0 {
		t.Fatalf("after Close: held %d waiting %d", held, waiting)
	}
	s.Release()
	select {
	case <-s.Drained():
	default:
		t.Fatal("not drained once the last unit was released")
	}
}
