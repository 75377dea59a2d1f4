package faultserver

import (
	"time"
)

// Rest is a client at the end of a run: its pool's counts (leased, pending
// and idle, from the client's Stats) and its open sockets (from its Dialer).
type Rest struct {
	Leased, Pending, Idle int
	Sockets               int
}

// AtRest reports nothing leased or pending, and as many open sockets as idle
// connections.
func (r Rest) AtRest() bool { return r.Leased == 0 && r.Pending == 0 && r.Sockets == r.Idle }

// Settle waits, within at most, for the client whose pool counts stats reads
// and whose sockets d counts to come to rest, and returns what it found last
// and whether that was at rest.
func Settle(stats func() (leased, pending, idle int), d *Dialer, within time.Duration) (Rest, bool) {
	deadline := time.Now().Add(within)
	for {
		var r Rest
		r.Leased, r.Pending, r.Idle = stats()
		r.Sockets = d.Counts().Open
		if r.AtRest() {
			return r, true
		}
		if time.Now().After(deadline) {
			return r, false
		}
		time.Sleep(5 * time.Millisecond) // Stats and socket closes have no event to wait on
	}
}

// WaitBaseline waits, within at most, for the process to hold no more
// descriptors and goroutines than at base, and returns the last measure and
// whether it got there.
func WaitBaseline(base Resources, within time.Duration) (Resources, bool) {
	deadline := time.Now().Add(within)
	for {
		now := Measure()
		if now.AtMost(base) {
			return now, true
		}
		if time.Now().After(deadline) {
			return now, false
		}
		time.Sleep(10 * time.Millisecond) // closed sockets and ended goroutines have no event to wait on
	}
}
