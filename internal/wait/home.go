package wait

import (
	"sync"
	"time"
)

// Home is where a client's shared goroutines and channels come from when a
// caller is in a testing/synctest bubble that the client is not in.
//
// A bubble owns what its goroutines make: the channels and timers they create
// and the goroutines they start, and a sync.WaitGroup they Add to. The
// runtime kills the whole process when a goroutine outside the bubble closes,
// sends on or receives from such a channel, stops or resets such a timer, or
// Adds to such a WaitGroup, and the other way round for the WaitGroup. A
// client made outside any bubble, and shared by tests that run in bubbles
// (one client for a whole suite, as with net/http's Transport), serves their
// callers on the callers' own goroutines (inline mailboxes): whatever such a
// caller would make for the client's goroutines to use later (a dial worker,
// a route, a ticket's channel, a dial's deadline) is made at home instead,
// on the home goroutine, which lives where the client was made.
//
// The home goroutine only starts work (Do) and makes channels (Chan); it
// never blocks on anything else. It is owned by the client (the go function
// given to NewHome) and ends when done closes, once it has run the work
// queued until then; after that Do refuses work (the caller does it itself,
// or gives up) and Chan makes the channel on the caller's goroutine.
//
// A client made inside a bubble has its home in that bubble too, and its
// callers, in the same bubble, are not foreign (Foreign): they make what they
// need themselves, as they always did.
type Home struct {
	bubbled bool // made inside a bubble (read-only)
	done    <-chan struct{}
	chans   chan chan struct{} // made at home, one for each waiter that asks
	wake    chan struct{}      // cap 1: work was queued

	mu     sync.Mutex
	work   []func() // under mu: what Do queued, run by the home goroutine in order
	closed bool     // under mu: the home goroutine has ended (done closed)
}

// NewHome starts the home goroutine with goFn (the client's, which waits for
// it) on this goroutine's side of any bubble; it ends when done closes.
func NewHome(goFn func(func()), done <-chan struct{}) *Home {
	h := &Home{bubbled: Bubbled(time.Now()), done: done, chans: make(chan chan struct{}), wake: make(chan struct{}, 1)}
	goFn(h.run) // owned by goFn's owner: ends when done closes
	return h
}

// Bubbled reports whether now, a reading of time.Now, was taken inside a
// testing/synctest bubble: there time.Now carries no monotonic clock reading
// (the runtime leaves it out, so that times of the fake clock and of the real
// one do not mix), and everywhere else it does. It costs no clock read of its
// own: callers pass a reading they take anyway.
func Bubbled(now time.Time) bool { return now == now.Round(0) }

// Foreign reports whether a caller that read the clock at now is in a bubble
// the home is not in: then it must not make what the client's goroutines use
// (Do, Chan, Ticket.ReadyAt). A nil Home has no foreign callers. Cheap: no
// clock read, no lock.
func (h *Home) Foreign(now time.Time) bool { return h != nil && !h.bubbled && Bubbled(now) }

// Do runs f on the home goroutine, after the work queued before it; it does
// not block. f must not block either: it starts a goroutine, posts a message,
// makes something. It reports false, and f does not run, when the home
// goroutine has ended (done closed).
func (h *Home) Do(f func()) bool {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return false
	}
	h.work = append(h.work, f)
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default: // already woken: the home goroutine takes f with the rest
	}
	return true
}

// Chan returns a channel made on the home goroutine, for a foreign waiter to
// block on: the client's goroutines may then close it. It blocks until the
// home goroutine hands it over (a goroutine switch); once done has closed it
// makes the channel itself.
func (h *Home) Chan() chan struct{} {
	select {
	case c := <-h.chans:
		return c
	case <-h.done:
		return make(chan struct{})
	}
}

func (h *Home) run() {
	next := make(chan struct{})
	for {
		select {
		case <-h.wake:
			h.runWork(false)
		case h.chans <- next:
			next = make(chan struct{})
		case <-h.done:
			h.runWork(true) // what Do accepted runs, as promised
			return
		}
	}
}

// runWork runs the work queued so far; last refuses any more.
func (h *Home) runWork(last bool) {
	h.mu.Lock()
	work := h.work
	h.work, h.closed = nil, last
	h.mu.Unlock()
	for _, f := range work {
		f()
	}
}
