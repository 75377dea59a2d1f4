package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/route"
)

// Idle expiry: when the route retires an idle connection, and the expiry
// tick that does it. The rules are written once (retirements); the idle
// list (onExpire, popIdle, h2WithRoom) and the outbox (an offer's due time,
// dueAt) read them.

// onExpire closes the idle connections due for retirement at now (an
// ExpiryTicked, after the outbox was taken back).
func (r *Route) onExpire(ctx actor.Context, now time.Time) {
	for i := 0; i < len(r.idle); {
		cs := r.idle[i]
		if reason, dead := r.expired(cs, now); dead {
			r.closeConn(ctx, cs, reason)
			continue
		}
		i++
	}
}

// retirement is one rule that retires an idle connection: when it is due
// (zero: the rule does not apply to it) and the reason it is closed for then.
type retirement struct {
	at     time.Time
	reason route.CloseReason
}

// retirements are the rules that retire cs, idle since idleSince, as the
// route knows them at now, in the order expired names them: its lifetime, the
// server's Keep-Alive timeout, MaxIdleTime, the idle timeout learned from the
// server's closes. The one place they are written: expired and dueAt read
// them.
func (r *Route) retirements(cs *connState, idleSince, now time.Time) [4]retirement {
	rs := [4]retirement{1: {cs.idleUntil, route.ReasonKeepAlive}}
	if cs.lifetime > 0 {
		rs[0] = retirement{cs.created.Add(cs.lifetime), route.ReasonLifetime}
	}
	if r.cfg.MaxIdleTime > 0 {
		rs[2] = retirement{idleSince.Add(r.cfg.MaxIdleTime), route.ReasonIdleExpired}
	}
	if d := r.learner.retireAfter(now); d > 0 {
		rs[3] = retirement{idleSince.Add(d), route.ReasonLearnedIdle}
	}
	return rs
}

// expired reports whether cs, idle, is due for retirement at now, and why
// (the first rule of retirements that is due).
func (r *Route) expired(cs *connState, now time.Time) (route.CloseReason, bool) {
	for _, rt := range r.retirements(cs, cs.idleSince, now) {
		if !rt.at.IsZero() && !now.Before(rt.at) {
			return rt.reason, true
		}
	}
	return "", false
}

// dueAt is when cs, idle since idleSince, is due for retirement (the
// earliest of its retirements at now); zero when never.
func (r *Route) dueAt(cs *connState, idleSince, now time.Time) time.Time {
	var due time.Time
	for _, rt := range r.retirements(cs, idleSince, now) {
		if !rt.at.IsZero() && (due.IsZero() || rt.at.Before(due)) {
			due = rt.at
		}
	}
	return due
}
