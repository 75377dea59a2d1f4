package actors

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// LongWait is how long a caller may wait for a connection before its route
// logs a warning, at most once per LongWaitEvery: callers that wait that long
// usually mean a limit is too small for the workload (long polls,
// server-sent events and watches each hold a connection), or that the dials
// are slow. The warning names what the oldest caller waits for (waitCause).
const LongWait = time.Second

// LongWaitEvery is the least time between two long-wait warnings of a route.
const LongWaitEvery = time.Minute

// longWait is a route's watch over its callers' waits. Its timer is the
// route's own: armed while callers wait, for the moment the oldest of them
// will have waited LongWait, it sends the route longWaitChecked, and the
// route looks then (a message to itself: nothing waits). So a warning does
// not depend on any other message arriving; a route whose callers never wait
// long arms its timer when its queue fills and stops it when it empties, and
// receives at most one message per LongWait.
type longWait struct {
	// timer is the route's while callers wait, or a warning is owed, and
	// goes back to the client's waitTimers when the queue empties (nil then).
	timer  *waitTimer
	armed  bool      // the timer will send longWaitChecked
	warned time.Time // when the last warning went out (zero = never)
	// late is the longest wait over LongWait that ended (served, given up)
	// before the timer came to it: the timer fires a moment after the
	// deadline, and the warning is owed all the same.
	late time.Duration
}

// waitTimer is a long-wait timer, lent to one route at a time by the
// client's waitTimers (RouteConfig): a route holds one only while its
// callers wait, so a client holds about as many as it has routes with
// callers waiting at once, however many routes it has had. A timer per route
// for the route's life would cost a timer for each of 100,000 routes used
// once (each queues its first caller while it dials), and the runtime keeps
// the room its timer heap once needed, stopped timers included, until it
// clears them.
type waitTimer struct {
	t *time.Timer
	// target is the route the timer is lent to, for its callback: nil while
	// it is not lent, and cleared when its route stops (a PID keeps its
	// actor reachable).
	target atomic.Pointer[actor.PID]
}

// lendTimer lends the route a long-wait timer for d from now: one of the
// client's, or a new one.
func (r *Route) lendTimer(ctx actor.Context, d time.Duration) *waitTimer {
	if pool := r.cfg.waitTimers; pool != nil {
		if wt, ok := pool.Get().(*waitTimer); ok {
			wt.target.Store(r.self)
			wt.t.Reset(d)
			return wt
		}
	}
	wt, sys := &waitTimer{}, ctx.ActorSystem()
	wt.target.Store(r.self)
	wt.t = time.AfterFunc(d, func() {
		if pid := wt.target.Load(); pid != nil {
			sys.Root.Send(pid, theLongWaitCheck)
		}
	})
	return wt
}

// returnTimer gives the route's long-wait timer back to the client's pool.
// The timer is stopped, and its callback is not on its way: Stop reported
// true, or its longWaitChecked has arrived.
func (r *Route) returnTimer() {
	lw := &r.longWait
	lw.timer.target.Store(nil)
	if pool := r.cfg.waitTimers; pool != nil {
		pool.Put(lw.timer)
	}
	lw.timer = nil
}

// longWaitChecked is sent by a route's long-wait timer to the route itself.
// No reply.
type longWaitChecked struct{}

// theLongWaitCheck is the one longWaitChecked sent, never changed.
var theLongWaitCheck = &longWaitChecked{}

// waitCause is what a route's oldest caller waits for.
type waitCause uint8

const (
	waitsForConnection waitCause = iota // none of the below (a moment's state)
	waitsForRouteLimit                  // every connection of the route is in use: MaxConnsPerRoute
	waitsForDials                       // dials in flight
	waitsForProbe                       // the fail-fast breaker's probe dial
	waitsForShare                       // the route's fleet share
	waitsForStream                      // a stream of an HTTP/2 connection (StrictMaxConcurrentRequests)
	waitsForTotal                       // a permit under MaxConnsTotal
	waitsForHost                        // a permit under MaxConnsPerHost
	waitsForPermit                      // a permit of the supervisor's, granted meanwhile
	waitsForLimit                       // the route's adaptive limit on its requests in flight (Adaptive)
)

// String names the cause as the warning's waits_for attribute shows it.
func (c waitCause) String() string {
	switch c {
	case waitsForRouteLimit:
		return "MaxConnsPerRoute"
	case waitsForDials:
		return "dials in flight"
	case waitsForProbe:
		return "fail-fast probe"
	case waitsForShare:
		return "fleet share"
	case waitsForStream:
		return "HTTP/2 stream"
	case waitsForTotal:
		return "MaxConnsTotal"
	case waitsForHost:
		return "MaxConnsPerHost"
	case waitsForPermit:
		return "connection permit"
	case waitsForLimit:
		return "adaptive limit"
	}
	return "connection"
}

// hint says what the cause usually means, for the warning's message.
func (c waitCause) hint() string {
	switch c {
	case waitsForRouteLimit:
		return "every connection of the route is in use; is MaxConnsPerRoute too small for long-lived requests?"
	case waitsForDials:
		return "its dials are slow (see DialTimeout, TLSHandshakeTimeout, MaxDialsPerRoute)"
	case waitsForProbe:
		return "its dials kept failing, and callers wait for the fail-fast probe dial"
	case waitsForShare:
		return "the route holds all of its fleet share, and callers wait for the fleet to grant more"
	case waitsForStream:
		return "every HTTP/2 connection is at its stream limit (StrictMaxConcurrentRequests)"
	case waitsForTotal:
		return "the pool holds MaxConnsTotal connections, and none is idle to evict"
	case waitsForHost:
		return "the host holds MaxConnsPerHost connections across its routes"
	case waitsForLimit:
		return "the route's adaptive limit holds its requests in flight: its upstream answers slower than it did unloaded (Adaptive)"
	}
	return "no connection was free"
}

// logLongWait logs the long-wait warning of route name.
// extra are more attributes (the adaptive limit's).
func logLongWait(l *slog.Logger, name string, c waitCause, waiting int, oldest time.Duration, leased int, extra ...any) {
	l.Warn("connactor: callers wait long for a connection: "+c.hint(), append([]any{"route", name, "waits_for", c.String(),
		"waiting", waiting, "oldest", oldest.Round(time.Millisecond), "leased", leased}, extra...)...)
}

// armLongWait arms the long-wait timer, unless it is armed: a caller just
// queued. The oldest caller is checked when it has waited LongWait.
func (r *Route) armLongWait(ctx actor.Context) {
	if r.longWait.armed {
		return
	}
	_, w, ok := r.waiters.Peek()
	if !ok {
		return
	}
	r.armLongWaitAt(ctx, w.at.Add(LongWait))
}

// armLongWaitAt arms the timer for at (the route's clock), at the soonest
// LongWaitEvery after the last warning.
func (r *Route) armLongWaitAt(ctx actor.Context, at time.Time) {
	lw := &r.longWait
	if !lw.warned.IsZero() {
		at = later(at, lw.warned.Add(LongWaitEvery))
	}
	d := at.Sub(r.clock())
	lw.armed = true
	if lw.timer != nil {
		lw.timer.t.Reset(d)
		return
	}
	lw.timer = r.lendTimer(ctx, d)
}

// waitEnded notes a caller that leaves the queue (served, given up, refused)
// after w's wait: one over LongWait that the timer has not seen is owed a
// warning, which the timer, due by then, gives. The timer of a queue that
// empties with no warning owed is stopped: a route whose callers wait for a
// moment (its first dial) gets no message from it.
func (r *Route) waitEnded(w waiter) {
	if r.closed {
		return
	}
	now := r.clock()
	lw := &r.longWait
	if waited := now.Sub(w.at); waited >= LongWait && waited > lw.late && r.mayWarn(now) {
		lw.late = waited
	}
	if lw.armed && lw.late == 0 && r.waiters.Len() == 0 && lw.timer.t.Stop() {
		lw.armed = false // else it fired, and its longWaitChecked is on its way
		r.returnTimer()
	}
}

// mayWarn reports whether LongWaitEvery has passed since the last warning.
func (r *Route) mayWarn(now time.Time) bool {
	return r.longWait.warned.IsZero() || now.Sub(r.longWait.warned) >= LongWaitEvery
}

// onLongWaitChecked handles the long-wait timer: it warns when the oldest
// caller has waited LongWait (or one that did left meanwhile), and arms the
// timer again while callers wait.
func (r *Route) onLongWaitChecked(ctx actor.Context) {
	lw := &r.longWait
	lw.armed = false
	if r.closed {
		return
	}
	now := r.clock()
	_, w, waiting := r.waiters.Peek()
	oldest := lw.late
	if waiting {
		oldest = max(oldest, now.Sub(w.at))
	}
	lw.late = 0
	if oldest >= LongWait && r.mayWarn(now) {
		lw.warned = now
		r.warnLongWait(ctx, oldest)
	}
	if waiting {
		r.armLongWaitAt(ctx, w.at.Add(LongWait))
	} else if lw.timer != nil {
		r.returnTimer() // it fired, and nobody waits
	}
}

// warnLongWait logs the long-wait warning, naming what the oldest caller
// waits for. A wait for the supervisor's permit (MaxConnsTotal,
// MaxConnsPerHost, the fleet share) is the supervisor's to name: the route
// tells it (LongWaitNoticed), and it logs the warning. A limit of the
// route's below the fixed one (the adaptive limit, MaxConnsPerHost's, the
// fleet share's: limitHeldBy) is named with the limit and the requests in
// flight.
func (r *Route) warnLongWait(ctx actor.Context, oldest time.Duration) {
	leased := len(r.conns) - len(r.idle) - r.dialing
	c := r.waitCause()
	switch {
	case c == waitsForPermit:
		ctx.Send(r.sup, &LongWaitNoticed{From: r.self, Route: r.name, Waiting: r.waiters.Len(), Oldest: oldest, Leased: leased})
	case c != waitsForConnection && c == r.heldBy():
		extra := []any{"limit", r.limitNow(), "in_flight", r.inFlight()}
		if r.ov.lim != nil {
			extra = append(extra, "no_load", r.ov.lim.NoLoad())
		}
		logLongWait(r.cfg.Logger, r.name, c, r.waiters.Len(), oldest, leased, extra...)
	default:
		logLongWait(r.cfg.Logger, r.name, c, r.waiters.Len(), oldest, leased)
	}
}

// waitCause says what the route's oldest caller waits for, as far as the
// route knows: a permit it asked the supervisor for is waitsForPermit.
func (r *Route) waitCause() waitCause {
	held := r.heldBy()
	switch {
	case r.breaker.state != breakerClosed:
		return waitsForProbe
	case r.shed:
		return waitsForShare // above its share: it asks for no permit
	case held != waitsForConnection:
		return held // a limit below the fixed one: adaptive, host, fleet share
	case r.dialing > 0:
		return waitsForDials
	case r.permitsPending > 0:
		return waitsForPermit
	case len(r.conns) >= r.cfg.MaxConnsPerRoute:
		return waitsForRouteLimit
	case r.strict && len(r.h2) > 0:
		return waitsForStream
	}
	return waitsForConnection
}

// stopLongWait stops the timer for good, when the route stops or reclaims
// itself (it queues no caller after): its callback no longer reaches the route.
func (r *Route) stopLongWait() {
	lw := &r.longWait
	if lw.timer != nil {
		if lw.timer.t.Stop() || !lw.armed {
			r.returnTimer()
		} else {
			lw.timer.target.Store(nil) // it fired: its longWaitChecked finds nobody; the timer is dropped
			lw.timer = nil
		}
	}
	lw.armed = false
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
