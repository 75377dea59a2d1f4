package client

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/connactor/connactor/internal/wait"
)

// waitLimit bounds every wait of one request (admission, route lookup, lease):
// the request's context, Config.LeaseTimeout counted from the first wait, and
// the client's Close. The timer is made only when the request has to wait, so a
// request served at once pays nothing for it.
type waitLimit struct {
	ctx     context.Context
	c       *Client
	req     *http.Request // named (its URL, redacted) by error messages
	timeout time.Duration
	timer   *time.Timer
	started time.Time // the request's start: wait errors say how long since then
}

func (l *waitLimit) expiry() <-chan time.Time {
	if l.timeout <= 0 {
		return nil
	}
	if l.timer == nil {
		l.timer = time.NewTimer(l.timeout)
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
// connactor, what was waited for, the request's URL and how long it waited; it
// is ErrNotSent (nothing was written), and errors.Is finds the context's error
// or ErrLeaseTimeout.
func (l *waitLimit) waitErr(why gaveUp, what string) error {
	waited := time.Since(l.started).Round(time.Millisecond)
	target := l.target()
	switch why {
	case byClose:
		return ErrClosed
	case byTimeout:
		return notSent(fmt.Errorf("%w: waited %v for %s for %s", ErrLeaseTimeout, waited, what, target))
	case byContext:
		return notSent(fmt.Errorf("connactor: gave up after %v waiting for %s for %s: %w", waited, what, target, l.ctx.Err()))
	}
	panic("client: internal error: no error for a served wait")
}
