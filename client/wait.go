package client

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/connactor/connactor/internal/wait"
)

// waitLimit bounds every wait of one request (admission, route lookup, lease,
// and the lease of a replay): the request's context, Config.LeaseTimeout for
// each wait that blocks, and the client's Close. The timer is made only when
// the request has to wait, so a request served at once pays nothing for it;
// later waits of the same request re-arm it.
type waitLimit struct {
	ctx      context.Context
	c        *Client
	req      *http.Request // named (its URL, redacted) by error messages
	timeout  time.Duration
	timer    *time.Timer
	started  time.Time // the request's start: a context's wait error says how long since then
	waitFrom time.Time // when the timer was armed: a LeaseTimeout error says how long that wait was
}

// expiry arms LeaseTimeout for a wait that blocks now, and returns its
// channel (nil without a LeaseTimeout). Each wait gets the whole LeaseTimeout:
// a replay's wait for a new connection is not cut short by the time its first
// attempt spent waiting and exchanging.
func (l *waitLimit) expiry() <-chan time.Time {
	if l.timeout <= 0 {
		return nil
	}
	l.waitFrom = time.Now()
	if l.timer == nil {
		l.timer = time.NewTimer(l.timeout)
	} else {
		l.timer.Reset(l.timeout) // since Go 1.23 no stale expiry of an earlier wait is received
	}
	return l.timer.C
}

func (l *waitLimit) stop() {
	if l.timer != nil {
		l.timer.Stop()
	}
}

// target is the request's URL, redacted, for error messages.
func (l *waitLimit) target() string { return l.req.URL.Redacted() }

// gaveUp says why a wait ended without its ticket being served.
type gaveUp uint8

const (
	served gaveUp = iota
	byContext
	byTimeout
	byClose
	byServerGone // the actor that holds the ticket stopped (its Done closed)
)

// await waits for t, or for the end of the wait (l, or gone closing). On
// giving up it cancels t and reports why; the caller then undoes a delivery
// that crossed the cancel in the one place its resource allows (see the
// callers). It does not block when t is already decided.
func await[T any](l *waitLimit, t *wait.Ticket[T], gone <-chan struct{}) (T, error, gaveUp) {
	if v, err, ok := t.Result(); ok {
		return v, err, served
	}
	why := l.until(t.Ready(), gone)
	if why != served {
		t.Cancel()
	}
	v, err, _ := t.Result()
	return v, err, why
}

// until waits for ready to close, or for the end of the wait (l, or gone
// closing), and says which came first.
func (l *waitLimit) until(ready, gone <-chan struct{}) gaveUp {
	select {
	case <-ready:
		return served
	case <-l.ctx.Done():
		return byContext
	case <-l.expiry():
		return byTimeout
	case <-l.c.closed:
		return byClose
	case <-gone:
		return byServerGone
	}
}

// waitErr is the error of a wait given up for why, waiting for what. It names
// connactor, what was waited for, the request's URL and how long: the wait
// that timed out (LeaseTimeout), or the request so far (its context ended).
// It is ErrNotSent (nothing was written), and errors.Is finds the context's
// error or ErrLeaseTimeout.
func (l *waitLimit) waitErr(why gaveUp, what string) error {
	target := l.target()
	switch why {
	case byClose:
		return ErrClosed
	case byTimeout:
		waited := time.Since(l.waitFrom).Round(time.Millisecond)
		return notSent(fmt.Errorf("%w: waited %v for %s for %s", ErrLeaseTimeout, waited, what, target))
	case byContext:
		waited := time.Since(l.started).Round(time.Millisecond)
		return notSent(fmt.Errorf("connactor: gave up after %v waiting for %s for %s: %w", waited, what, target, l.ctx.Err()))
	}
	panic("client: internal error: no error for a served wait")
}
