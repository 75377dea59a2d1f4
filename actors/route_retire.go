package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/route"
)

// The retirement policy: when a connection must close, and why. It is
// written once, in retireReason (and the deadlines it reads), and asked at
// every turn of a connection's life: when it comes free (released, dialed,
// given back: available), when it is leased from the idle list (popIdle,
// h2WithRoom) or offered (refill, dueAt), when an HTTP/2 connection is asked
// for a new stream (h2Room) or ends its last one (onH2Closed), when its
// address leaves the resolved set (onEndpointsResolved), and on every expiry
// tick (onExpire).

// retirement is one timed rule: when it is due (zero: the rule does not
// apply) and the reason the connection closes for then.
type retirement struct {
	at     time.Time
	reason route.CloseReason
}

// deadlines are the timed rules that retire cs, in the order retireReason
// names them: its lifetime, and, while it is idle (since cs.idleSince), the
// server's Keep-Alive timeout, MaxIdleTime and the idle timeout learned from
// the server's closes (as the route knows it at now).
func (r *Route) deadlines(cs *connState, idle bool, now time.Time) [4]retirement {
	var rs [4]retirement
	if cs.lifetime > 0 {
		rs[0] = retirement{cs.created.Add(cs.lifetime), route.ReasonLifetime}
	}
	if !idle {
		return rs
	}
	rs[1] = retirement{cs.idleUntil, route.ReasonKeepAlive}
	if r.cfg.MaxIdleTime > 0 {
		rs[2] = retirement{cs.idleSince.Add(r.cfg.MaxIdleTime), route.ReasonIdleExpired}
	}
	if d := r.learner.retireAfter(now); d > 0 {
		rs[3] = retirement{cs.idleSince.Add(d), route.ReasonLearnedIdle}
	}
	return rs
}

// retireReason says whether cs must retire at now, and why; "" when it may
// serve on. The rules, in the order it names them: the client closes; its
// lifetime is over; it has served, with the streams it carries,
// MaxRequestsPerConn; its address left the resolved set; its address is
// held out for failed exchanges (route_outlier.go); and, for a
// connection idle since cs.idleSince (idle: on the idle list, on offer, or
// an offer given back), the server's Keep-Alive timeout, MaxIdleTime and the
// learned idle timeout. A connection in use is never cut: one that carries
// streams drains until its last one ends (h2Room, onH2Closed), and an
// HTTP/1.1 connection is asked when it comes free.
func (r *Route) retireReason(cs *connState, idle bool, now time.Time) route.CloseReason {
	if r.closed {
		return route.ReasonClientClosed
	}
	if cs.serverClosed {
		return route.ReasonServerClosed
	}
	rs := r.deadlines(cs, idle, now)
	if due(rs[0], now) {
		return rs[0].reason
	}
	if max := r.cfg.MaxRequestsPerConn; max > 0 && cs.served+cs.streams() >= max {
		return route.ReasonMaxRequests
	}
	if cs.ep != nil && cs.ep.draining {
		return route.ReasonEndpointGone
	}
	if cs.ep != nil && r.heldForExchanges(cs.ep, now) {
		return route.ReasonEjected
	}
	for _, rt := range rs[1:] {
		if due(rt, now) {
			return rt.reason
		}
	}
	return ""
}

// due reports whether rule rt is due at now.
func due(rt retirement, now time.Time) bool { return !rt.at.IsZero() && !now.Before(rt.at) }

// dueAt is when cs, idle, is due for retirement by its deadlines (the
// earliest); zero when never. An offer carries it (offer.until).
func (r *Route) dueAt(cs *connState, now time.Time) time.Time {
	var at time.Time
	for _, rt := range r.deadlines(cs, true, now) {
		if !rt.at.IsZero() && (at.IsZero() || rt.at.Before(at)) {
			at = rt.at
		}
	}
	return at
}

// closeIfDue closes cs, idle, when it must retire at now, and reports
// whether it did: the one check every path that takes a connection from the
// idle list makes (popIdle, h2WithRoom, onExpire).
func (r *Route) closeIfDue(ctx actor.Context, cs *connState, now time.Time) bool {
	reason := r.retireReason(cs, true, now)
	if reason == "" {
		return false
	}
	r.closeConn(ctx, cs, reason)
	return true
}

// onExpire closes the idle connections due for retirement at now (an
// ExpiryTicked, after the outbox was taken back).
func (r *Route) onExpire(ctx actor.Context, now time.Time) {
	for i := 0; i < len(r.idle); {
		if !r.closeIfDue(ctx, r.idle[i], now) {
			i++
		}
	}
}
