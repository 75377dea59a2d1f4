package actors

import (
	"testing"
	"time"

	"github.com/connactor/connactor/route"
)

// The retirement policy names the first rule that holds, in one order for
// every path that asks: the client closing, the lifetime, MaxRequestsPerConn
// (streams in flight count), the address gone, and, for an idle connection
// only, the Keep-Alive timeout, MaxIdleTime and the learned idle timeout.
func TestRetireReasonNamesTheFirstRuleThatHoldsInOneOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	gone := &endpoint{draining: true}
	for _, tc := range []struct {
		name   string
		closed bool
		cs     connState
		idle   bool
		want   route.CloseReason
	}{
		{name: "nothing holds", cs: connState{created: t0, lifetime: 2 * time.Hour, served: 2, idleSince: now}, idle: true},
		{name: "the client closes", closed: true, cs: connState{created: t0}, want: route.ReasonClientClosed},
		{name: "lifetime over, before the rest", cs: connState{created: t0, lifetime: time.Hour, served: 9, ep: gone},
			want: route.ReasonLifetime},
		{name: "max requests served", cs: connState{created: t0, served: 9, ep: gone}, want: route.ReasonMaxRequests},
		{name: "max requests with streams in flight", cs: connState{created: t0, served: 6, proto: &http2Conn{n: 3}},
			want: route.ReasonMaxRequests},
		{name: "address gone", cs: connState{created: t0, ep: gone, idleSince: t0}, idle: true, want: route.ReasonEndpointGone},
		{name: "keep-alive over while idle", cs: connState{created: t0, idleUntil: now, idleSince: now.Add(-time.Second)}, idle: true,
			want: route.ReasonKeepAlive},
		{name: "idle too long", cs: connState{created: t0, idleSince: now.Add(-time.Minute)}, idle: true, want: route.ReasonIdleExpired},
		{name: "the idle rules do not retire a busy connection", cs: connState{created: t0, idleUntil: now, idleSince: t0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Route{cfg: &RouteConfig{MaxRequestsPerConn: 9, MaxIdleTime: time.Minute}, closed: tc.closed}
			cs := tc.cs
			if cs.proto == nil {
				cs.proto = http1Conn{}
			}
			if got := r.retireReason(&cs, tc.idle, now); got != tc.want {
				t.Fatalf("retireReason = %q, want %q", got, tc.want)
			}
		})
	}
}

// An offer's due time is the earliest deadline of its connection as an idle
// one: its lifetime, the Keep-Alive timeout or MaxIdleTime, whichever comes
// first; zero when none applies.
func TestAnOffersDueTimeIsItsConnectionsEarliestIdleDeadline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		maxIdle time.Duration
		cs      connState
		want    time.Time
	}{
		{name: "no deadline", cs: connState{created: t0, idleSince: t0}},
		{name: "lifetime first", maxIdle: time.Hour, cs: connState{created: t0, lifetime: time.Minute, idleSince: t0},
			want: t0.Add(time.Minute)},
		{name: "keep-alive first", maxIdle: time.Hour, cs: connState{created: t0, idleUntil: t0.Add(5 * time.Second), idleSince: t0},
			want: t0.Add(5 * time.Second)},
		{name: "max idle time", maxIdle: time.Minute, cs: connState{created: t0, idleSince: t0.Add(time.Second)},
			want: t0.Add(time.Minute + time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Route{cfg: &RouteConfig{MaxIdleTime: tc.maxIdle}}
			cs := tc.cs
			if got := r.dueAt(&cs, t0); !got.Equal(tc.want) {
				t.Fatalf("dueAt = %v, want %v", got, tc.want)
			}
		})
	}
}
