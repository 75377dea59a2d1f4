// Package wait holds the two primitives every wait of connactor is built on:
// Ticket, one caller's wait for one value (a lease, an admission, an
// exchange's answer), and Semaphore, the FIFO admission counter of
// MaxConcurrentRequests. Both decide the race between "served" and "gave up"
// in exactly one place, as net/http's wantConn (tryDeliver/cancel) and
// golang.org/x/sync/semaphore ("acquired after cancel: put it back") do.
package wait

import (
	"sync"
)

type ticketState uint8

const (
	waiting   ticketState = iota
	delivered             // the server gave a value; the waiter owns it
	rejected              // the server answered with an error
	cancelled             // the waiter gave up before it was served
	returned              // the waiter gave up after it was served: the value goes back
)

// closedCh is returned by Ready for tickets that are already decided.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Ticket is one waiter's claim on one value of type T. The server side (an
// actor, or Semaphore) calls Deliver or Reject; the waiter calls Ready, Result
// and, if it gives up, Cancel. Exactly one of these outcomes holds:
//
//   - delivered: Deliver won. The waiter owns the value, unless it then
//     Cancels, which turns the ticket into "returned": Returned reports the
//     value, and the server side takes it back;
//   - rejected: Reject won; Result reports the error;
//   - cancelled: Cancel won; Deliver and Reject report false, and the server
//     keeps the value it meant to give.
//
// A Ticket is safe for concurrent use; it costs one mutex operation per call,
// and a channel only when the waiter has to block (Ready before the outcome).
// The zero Ticket is ready to use; a Ticket must not be copied after first use.
type Ticket[T any] struct {
	mu    sync.Mutex
	state ticketState
	val   T
	err   error
	ready chan struct{} // made by Ready while waiting; closed on the outcome
}

// Deliver gives v to the waiter. It reports false when the waiter has given up
// (or the ticket was already decided): the caller keeps v.
func (t *Ticket[T]) Deliver(v T) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != waiting {
		return false
	}
	t.state, t.val = delivered, v
	t.wake()
	return true
}

// Reject answers the waiter with err. It reports false when the ticket was
// already decided.
func (t *Ticket[T]) Reject(err error) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != waiting {
		return false
	}
	t.state, t.err = rejected, err
	t.wake()
	return true
}

func (t *Ticket[T]) wake() {
	if t.ready != nil {
		close(t.ready)
	}
}

// Ready returns a channel that is closed once the ticket is decided. It does
// not block; the channel is made on the first call that finds the ticket
// undecided (a waiter that never blocks never pays for it).
func (t *Ticket[T]) Ready() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != waiting {
		return closedCh
	}
	if t.ready == nil {
		t.ready = make(chan struct{})
	}
	return t.ready
}

// ReadyAt is Ready for a waiter that is foreign to h (Home.Foreign): in a
// testing/synctest bubble that the server side is not in. The channel is made
// at home, so that the server side may close it; a channel the waiter made
// would belong to its bubble, and closing it from outside kills the process.
// It blocks only for the hand-over of that channel (Home.Chan).
func (t *Ticket[T]) ReadyAt(h *Home) <-chan struct{} {
	t.mu.Lock()
	switch {
	case t.state != waiting:
		t.mu.Unlock()
		return closedCh
	case t.ready != nil: // asked before: no hand-over again
		c := t.ready
		t.mu.Unlock()
		return c
	}
	t.mu.Unlock()
	c := h.Chan()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != waiting {
		return closedCh
	}
	if t.ready == nil {
		t.ready = c
	}
	return t.ready
}

// Done reports whether the ticket is decided (delivered, rejected or cancelled).
func (t *Ticket[T]) Done() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state != waiting
}

// Result returns the delivered value, or the rejection's error. ok is false
// while the ticket is undecided, and after Cancel.
func (t *Ticket[T]) Result() (v T, err error, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.state {
	case delivered:
		return t.val, nil, true
	case rejected:
		return v, t.err, true
	}
	return v, nil, false
}

// Cancel is the waiter giving up. If the ticket was still waiting it is
// cancelled, and the server side will keep what it meant to deliver. If a
// value was delivered and not yet taken back, the ticket becomes "returned"
// and Cancel reports true: the waiter must tell the server side (which takes
// the value back through Returned) and must not use the value. Cancel does
// not block; calling it again, or after a rejection, does nothing.
func (t *Ticket[T]) Cancel() (wasDelivered bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.state {
	case waiting:
		t.state = cancelled
		t.wake()
	case delivered:
		t.state = returned
		return true
	}
	return false
}

// Returned reports the value a waiter gave back after it was delivered (see
// Cancel), for the server side to take back. It reports ok only once: a
// second call finds nothing, so the value cannot be taken back twice.
func (t *Ticket[T]) Returned() (v T, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != returned {
		return v, false
	}
	v, t.val = t.val, v
	t.state = cancelled
	return v, true
}
