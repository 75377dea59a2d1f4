// Package hedge holds the pure pieces of hedged requests that a route actor
// owns: the policy and its defaults, a streaming latency sketch (Sketch), the
// budget that bounds hedged attempts over the last ten seconds (Budget), and
// the decision, for one request, of whether a further attempt goes now or
// when it is due (Decide). None of them has a goroutine or a clock: time
// comes in as an argument, so tests give explicit times, and none is safe
// for concurrent use: its owner (the route actor) calls it inside Receive.
//
// A hedged request, as "The Tail at Scale" (Dean and Barroso, 2013)
// describes it: when an attempt has had no response head for a delay (a
// fixed one, or the route's measured latency at a percentile, so that only
// the slowest few percent are hedged), a copy goes to another connection or
// endpoint; the first response head wins and the others are cancelled. The
// budget keeps hedging from multiplying the load when a whole route is
// slow: then every request would pass the percentile's delay.
package hedge
