package actors

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"time"

	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
	"github.com/connactor/connactor/telemetry"
)

// Call is one request's passage through the pool, on its caller's goroutine:
// its admission, its route, its lease and the lease of a replay. Every wait
// of a Call is bounded by the request's context and PoolConfig.LeaseTimeout
// for each wait that blocks, and is answered when the pool closes (by
// whoever ends the queue it waits in: see Pool.Close). The timer is made only
// when the request has to wait, so a request served at once pays nothing for
// it; later waits of the same request re-arm it. A Call is a value on its
// caller's stack, used by that goroutine only; Stop it when the request is
// over.
type Call struct {
	p        *Pool
	ctx      context.Context
	req      *http.Request // named (its URL, redacted) by error messages
	key      route.Key
	tel      *telemetry.Request
	trace    *httptrace.ClientTrace
	gzip     bool // send "Accept-Encoding: gzip" and decompress (pool_gzip.go)
	timer    *time.Timer
	started  time.Time // the request's start: a context's wait error says how long since then
	waitFrom time.Time // when the timer was armed: a LeaseTimeout error says how long that wait was
	queued   bool      // the call waited for admission: started is no longer now
	// foreign: the caller is in a testing/synctest bubble the pool is not in
	// (wait.Home.Foreign, read from started). What it asks of the route and
	// the supervisor is posted from the pool's home, not run on its
	// goroutine, and its waits block on channels made there: the actors'
	// goroutines, outside its bubble, must neither answer on the caller's
	// channels nor make what they keep (a route, a timer) in its bubble.
	foreign bool
}

// NewCall begins req's passage to route key, traced by tel (nil = not
// traced). It reads the clock once: Started.
func (p *Pool) NewCall(req *http.Request, key route.Key, tel *telemetry.Request) Call {
	ctx := req.Context()
	now := time.Now()
	return Call{p: p, ctx: ctx, req: req, key: key, tel: tel, trace: httptrace.ContextClientTrace(ctx),
		gzip: p.wantsGzip(req), started: now, foreign: p.home.Foreign(now)}
}

// readyOf is t.Ready, or, for a foreign caller, a channel of the pool's home
// (Ticket.ReadyAt).
func readyOf[T any](p *Pool, foreign bool, t *wait.Ticket[T]) <-chan struct{} {
	if foreign {
		return t.ReadyAt(p.home)
	}
	return t.Ready()
}

// postFrom posts m to mb on this goroutine, or, for a foreign caller, from
// the pool's home (wait.Home.Do): the actor then runs there, not in the
// caller's bubble. Posts from home keep their order. Once the pool's life
// has ended (Close) the caller posts itself: the mailbox answers it.
func postFrom(p *Pool, foreign bool, mb interface{ PostUserMessage(any) }, m any) {
	if foreign && p.home.Do(func() { mb.PostUserMessage(m) }) {
		return
	}
	mb.PostUserMessage(m)
}

// Started is when the call began.
func (l *Call) Started() time.Time { return l.started }

// now is the time for a decision of the call's: when it began, read once,
// unless it has waited since.
func (l *Call) now() time.Time {
	if l.queued {
		return time.Now()
	}
	return l.started
}

// Context is the request's context.
func (l *Call) Context() context.Context { return l.ctx }

// Stop stops the call's timer, if it made one.
func (l *Call) Stop() {
	if l.timer != nil {
		l.timer.Stop()
	}
}

// Admit takes one of MaxConcurrentRequests: an atomic while there is room and
// nobody queues, the semaphore's FIFO otherwise. The admission is held until
// the request's exchange ends (its body read or closed), or given back with
// Leave when the request fails.
func (l *Call) Admit() error {
	p := l.p
	if p.admission.TryAcquire() {
		return nil
	}
	l.queued = true
	t := &wait.Ticket[struct{}]{}
	p.admission.Enqueue(t)
	_, err, why := await(l, t)
	if why != served {
		p.admission.Cancel(t) // an admission that crossed the cancel goes back
		return l.waitErr(why, "admission (MaxConcurrentRequests)")
	}
	return err // ErrClosed: the pool closed its queue
}

// Leave gives back the admission of a request that failed: no exchange of
// its holds it.
func (l *Call) Leave() { l.p.admission.Release() }

// expiry arms LeaseTimeout for a wait that blocks now, and returns its
// channel (nil without a LeaseTimeout). Each wait gets the whole LeaseTimeout:
// a replay's wait for a new connection is not cut short by the time its first
// attempt spent waiting and exchanging.
func (l *Call) expiry() <-chan time.Time {
	timeout := l.p.cfg.LeaseTimeout
	if timeout <= 0 {
		return nil
	}
	l.waitFrom = time.Now()
	if l.timer == nil {
		l.timer = time.NewTimer(timeout)
	} else {
		l.timer.Reset(timeout) // since Go 1.23 no stale expiry of an earlier wait is received
	}
	return l.timer.C
}

// target is the request's URL, redacted, for error messages.
func (l *Call) target() string { return l.req.URL.Redacted() }

// gaveUp says why a wait ended without its ticket being served.
type gaveUp uint8

const (
	served gaveUp = iota
	byContext
	byTimeout
)

// await waits for t, or for the end of the wait (l). On giving up it cancels
// t and reports why; the caller then undoes a delivery that crossed the
// cancel in the one place its resource allows (see the callers). It does not
// block when t is already decided.
func await[T any](l *Call, t *wait.Ticket[T]) (T, error, gaveUp) {
	if v, err, ok := t.Result(); ok {
		return v, err, served
	}
	why := l.until(readyOf(l.p, l.foreign, t))
	if why != served {
		t.Cancel()
	}
	v, err, _ := t.Result()
	return v, err, why
}

// until waits for ready to close, or for the end of the wait (l), and says
// which came first. It waits on channels of this request only (its ticket's,
// its context's, its timer's): one that every waiter shared (the pool
// closing, a route stopping) would be locked by each park and wake of every
// waiter, which on many cores is where the time goes. The queues such a
// channel would have told about are answered by whoever ends them instead.
// Without a context that can end and a LeaseTimeout, it is a plain receive.
func (l *Call) until(ready <-chan struct{}) gaveUp {
	done, expiry := l.ctx.Done(), l.expiry()
	if done == nil && expiry == nil {
		<-ready
		return served
	}
	select {
	case <-ready:
		return served
	case <-done:
		return byContext
	case <-expiry:
		return byTimeout
	}
}

// waitErr is the error of a wait given up for why, waiting for what. It names
// connactor, what was waited for, the request's URL and how long: the wait
// that timed out (LeaseTimeout), or the request so far (its context ended).
// It is ErrNotSent (nothing was written), and errors.Is finds the context's
// error or ErrLeaseTimeout.
func (l *Call) waitErr(why gaveUp, what string) error {
	target := l.target()
	switch why {
	case byTimeout:
		waited := time.Since(l.waitFrom).Round(time.Millisecond)
		return NotSent(fmt.Errorf("%w: waited %v for %s for %s", ErrLeaseTimeout, waited, what, target))
	case byContext:
		waited := time.Since(l.started).Round(time.Millisecond)
		return NotSent(fmt.Errorf("connactor: gave up after %v waiting for %s for %s: %w", waited, what, target, l.ctx.Err()))
	}
	panic("actors: internal error: no error for a served wait")
}
