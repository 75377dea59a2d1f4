package wait

import (
	"container/list"
	"sync"
	"sync/atomic"
)

// Semaphore is a counting semaphore whose waiters are served in arrival
// order, modelled on golang.org/x/sync/semaphore (one unit per Acquire). It is
// connactor's admission under MaxConcurrentRequests.
//
// The fast path, TryAcquire while nobody waits, is one atomic add and never
// takes the lock, so the request path does not serialize on it. A waiter
// holds a Ticket: Release hands its unit straight to the oldest waiter
// (Deliver), skipping waiters that gave up; a waiter that gives up after it
// was served puts the unit back (Cancel). Close answers every waiter. Safe
// for concurrent use.
type Semaphore struct {
	// cur is written by every acquire and release: it has a cache line of
	// its own, so that reading the fields below (also every request) does not
	// pull it from the core that wrote it last, nor writing it theirs.
	_   [64]byte
	cur atomic.Int64 // units held; above size only for an instant (see TryAcquire)
	_   [56]byte

	size int64
	// nwait is the number of queued waiters: a TryAcquire that sees it
	// non-zero fails (FIFO), and a Release that sees it non-zero serves them.
	nwait atomic.Int64
	wantZ atomic.Bool // a Drained channel waits for cur == 0

	mu      sync.Mutex
	waiters list.List // of *Ticket[struct{}], oldest first
	byTick  map[*Ticket[struct{}]]*list.Element
	zero    chan struct{} // made by Drained; closed when cur reaches 0
	closed  error         // set by Close: queued and later waiters are rejected with it
}

// NewSemaphore returns a semaphore of size units (size > 0).
func NewSemaphore(size int) *Semaphore {
	if size <= 0 {
		panic("wait: semaphore size must be positive")
	}
	return &Semaphore{size: int64(size), byTick: map[*Ticket[struct{}]]*list.Element{}}
}

// TryAcquire takes a unit if one is free and nobody is queued (so the queue
// stays FIFO). It never blocks. It is one atomic add, which unlike a
// compare-and-swap loop never retries when other cores acquire at the same
// time: an add that went past size is undone at once, as a Release (which
// serves a waiter that the instant excess turned away).
func (s *Semaphore) TryAcquire() bool {
	if s.nwait.Load() != 0 {
		return false
	}
	if s.cur.Add(1) <= s.size {
		return true
	}
	s.Release()
	return false
}

// take takes a unit if one is free, never going past size (the slow path's:
// a waiter is served only with a unit that is there).
func (s *Semaphore) take() bool {
	for {
		n := s.cur.Load()
		if n >= s.size {
			return false
		}
		if s.cur.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Enqueue queues t for the next free unit, or delivers it at once if a unit is
// free, or rejects it with Close's error. The caller then waits on t.Ready()
// and, if it gives up, calls Cancel.
func (s *Semaphore) Enqueue(t *Ticket[struct{}]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed != nil {
		t.Reject(s.closed)
		return
	}
	// Announce the waiter before trying again: a Release that lowers cur after
	// this attempt sees nwait > 0 and serves the queue, so no unit is missed.
	s.nwait.Add(1)
	if s.waiters.Len() == 0 && s.take() {
		s.nwait.Add(-1)
		t.Deliver(struct{}{})
		return
	}
	s.byTick[t] = s.waiters.PushBack(t)
}

// Release gives a unit back; the oldest waiter still waiting gets it.
func (s *Semaphore) Release() {
	n := s.cur.Add(-1)
	if n < 0 {
		panic("wait: semaphore released more than acquired")
	}
	if s.nwait.Load() > 0 {
		s.serve()
	}
	if n == 0 && s.wantZ.Load() {
		s.mu.Lock()
		if s.cur.Load() == 0 {
			s.closeZero()
		}
		s.mu.Unlock()
	}
}

// closeZero closes the channel Drained handed out, if any; under mu, with no
// unit held.
func (s *Semaphore) closeZero() {
	if s.zero != nil {
		close(s.zero)
		s.zero = nil
		s.wantZ.Store(false)
	}
}

// serve hands free units to queued waiters in order, dropping those that gave up.
func (s *Semaphore) serve() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for e := s.waiters.Front(); e != nil; e = s.waiters.Front() {
		t := e.Value.(*Ticket[struct{}])
		if t.Done() {
			s.remove(e, t) // it gave up; Cancel will find it gone
			continue
		}
		if !s.take() {
			return
		}
		s.remove(e, t)
		if !t.Deliver(struct{}{}) && s.cur.Add(-1) == 0 { // it gave up after the check: the unit stays free
			s.closeZero() // and it was the last one held: a Release that ran meanwhile saw another
		}
	}
}

func (s *Semaphore) remove(e *list.Element, t *Ticket[struct{}]) {
	s.waiters.Remove(e)
	delete(s.byTick, t)
	s.nwait.Add(-1)
}

// Cancel is a waiter giving up: t leaves the queue, and if it was served just
// before, its unit is released ("acquired after cancel: put it back"). This is
// the one place where a lost race with Release is undone.
// Cancel is idempotent, and t may have been cancelled already (by a wait that
// gave up): what was delivered is given back exactly once (Returned).
func (s *Semaphore) Cancel(t *Ticket[struct{}]) {
	t.Cancel()
	if _, ok := t.Returned(); ok {
		s.Release()
		return
	}
	s.mu.Lock()
	if e := s.byTick[t]; e != nil {
		s.remove(e, t)
	}
	s.mu.Unlock()
}

// Close rejects every queued waiter with err, and every later Enqueue: the
// queue ends with its owner (a client that closes). Units held stay held
// until released; TryAcquire still takes free ones. Calling it again does
// nothing.
func (s *Semaphore) Close(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed != nil {
		return
	}
	s.closed = err
	for e := s.waiters.Front(); e != nil; e = s.waiters.Front() {
		t := e.Value.(*Ticket[struct{}])
		s.remove(e, t)
		t.Reject(err) // false for one that gave up: nothing to answer
	}
}

// Held returns how many units are held and how many callers wait.
func (s *Semaphore) Held() (held, waiting int) {
	return int(min(s.cur.Load(), s.size)), int(s.nwait.Load())
}

// Drained returns a channel closed once no unit is held (at once if none is).
// Shutdown uses it to wait for the requests in flight.
func (s *Semaphore) Drained() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.zero == nil {
		s.zero = make(chan struct{})
		s.wantZ.Store(true)
	}
	z := s.zero
	if s.cur.Load() == 0 {
		close(s.zero)
		s.zero = nil
		s.wantZ.Store(false)
	}
	return z
}
