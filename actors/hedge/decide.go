package hedge

import "time"

// DelayAt returns how long an attempt waits for its response head before the
// next one goes, at now: p.Delay when set, or else the route's latency at
// p.Percentile measured by s. ok is false while s (nil: none) has too few
// samples to say (then no request is hedged: a route's first requests
// teach it its latency). p has its defaults (WithDefaults).
func (p Policy) DelayAt(s *Sketch, now time.Time) (d time.Duration, ok bool) {
	switch {
	case p.Delay > 0:
		return p.Delay, true
	case s == nil:
		return 0, false
	}
	return s.Quantile(now, p.Percentile)
}

// Verdict is Decide's answer for one request.
type Verdict uint8

const (
	// Wait: no further attempt yet; ask again at the time Decide returned.
	Wait Verdict = iota
	// Send: send a further attempt now (the budget has counted it).
	Send
	// Done: no further attempt for this request (it has made MaxAttempts,
	// or the delay is unknown).
	Done
)

func (v Verdict) String() string {
	switch v {
	case Wait:
		return "wait"
	case Send:
		return "send"
	case Done:
		return "done"
	}
	return "verdict?"
}

// Attempts is what Decide needs to know of one request: how many attempts
// were written, and when the latest was (the delay counts from the write,
// not from a wait in the route's queue).
type Attempts struct {
	Written     int
	LastWritten time.Time
}

// Decide says, at now, whether the request with attempts a (none answered
// yet) sends a further attempt, for the route with delay (DelayAt's answer;
// ok false makes it Done), room under its limits (room reports whether it
// has a connection or stream it could lease now without waiting; asked
// only once the attempt is due, as looking may cost the route work), and
// budget b:
//
//   - Done when the request has made p.MaxAttempts attempts, or has none
//     written yet, or the delay is unknown;
//   - Wait until LastWritten+delay before then;
//   - Send once due, with room, if the budget allows it (Allow counts it);
//   - Wait until now+delay when due but without room or budget: a hedge
//     never queues behind the route's limits or outruns its budget, and the
//     request may try again after another delay.
//
// p has its defaults (WithDefaults).
func Decide(p Policy, delay time.Duration, ok bool, a Attempts, now time.Time, room func() bool, b *Budget) (Verdict, time.Time) {
	if !ok || a.Written == 0 || a.Written >= p.MaxAttempts {
		return Done, time.Time{}
	}
	due := a.LastWritten.Add(delay)
	if now.Before(due) {
		return Wait, due
	}
	if !room() || !b.Allow(now, p.Budget) {
		return Wait, now.Add(delay)
	}
	return Send, now
}
