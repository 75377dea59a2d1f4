package actors

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/connactor/connactor/actors/hedge"
	"github.com/connactor/connactor/telemetry"
)

// Hedged requests, the caller's half (the route's is route_hedge.go): the
// race between a request's attempts runs on its caller's goroutine, which
// starts each attempt's exchange on a goroutine of its own and takes the
// first response head.
//
//   - Only requests hedge.Eligible allows (net/http's replay rule: an
//     idempotent method or an Idempotency-Key, a body it can get again), not
//     marked WithoutHedge, on a route whose delay is known.
//   - A further attempt is asked of the route (a LeaseRequest with a
//     HedgeAsk) when the last one written has had no response head for the
//     delay, counted from the end of its write (httptrace's WroteRequest),
//     as the route's measured latency is: an attempt whose goroutine or
//     write is slow is not hedged before its request is out, so a hedge
//     never overtakes it on the wire. The route serves the ask or refuses
//     it at once, and the budget, room and endpoint rules are the route's. Each hedged attempt also
//     takes one of MaxConcurrentRequests, without waiting.
//   - Each attempt has its own context, derived from the request's: the
//     first response head wins, and only the others' contexts are
//     cancelled, which ends their exchanges at once (an HTTP/1.1 connection
//     closes, an HTTP/2 stream is reset). The winner's body reads to its
//     end: its context ends with its exchange.
//   - The race returns after every other attempt has ended: a loser's
//     response that arrived too is closed, never returned.
//   - When every attempt fails, the first attempt's error is returned (its
//     Exchange decides a replay, as without hedging).

// HedgePolicy is the policy of PoolConfig.Hedge (package hedge's Policy,
// named here for the client, which imports no policy package).
type HedgePolicy = hedge.Policy

// noHedge is the context key of WithoutHedge.
type noHedge struct{}

// WithoutHedge returns ctx marked so that requests made with it are never
// hedged.
func WithoutHedge(ctx context.Context) context.Context {
	return context.WithValue(ctx, noHedge{}, true)
}

// hedgeDelay returns how long the call's first attempt, on route h, waits
// for its response head before a hedge is asked for: the policy's Delay,
// the route's measured one, or 0 when req is not hedged.
func (l *Call) hedgeDelay(h *routeHandle, req *http.Request) time.Duration {
	pol := l.p.cfg.Hedge
	if !pol.On() || !hedge.Eligible(req) || l.ctx.Value(noHedge{}) != nil {
		return 0
	}
	if pol.Delay > 0 {
		return pol.Delay
	}
	return time.Duration(h.Pub.HedgeDelay.Load())
}

// RoundTrip sends req on x, the call's leased attempt, and returns the
// response head and the attempt that won it (its Early), hedged when the
// pool's policy says so (see above): then further attempts may go on other
// connections of the route, and the first response head wins. Without
// hedging it is x.RoundTrip, and x wins. On failure, the error is x's (the
// first attempt's), and x's lease is released.
func (l *Call) RoundTrip(x *Exchange, req *http.Request) (*http.Response, *Exchange, error) {
	delay := l.hedgeDelay(x.route, req)
	if delay <= 0 {
		resp, err := x.RoundTrip(req)
		return resp, x, err
	}
	return l.race(x, req, delay)
}

// attempt is one attempt of a hedged request.
type attempt struct {
	x     *Exchange // its cancel ends the attempt's own context
	span  *telemetry.Attempt
	err   error
	ended bool
}

// attemptResult is what an attempt's goroutine hands back to the race.
type attemptResult struct {
	i    int
	resp *http.Response
	err  error
}

// end records that a's exchange returned res, and reports whether it
// failed (its span ends then, with the error); a response's span is ended
// by whoever decides whether it won.
func (a *attempt) end(res attemptResult) (failed bool) {
	a.ended = true
	if res.err == nil {
		return false
	}
	a.err = res.err
	a.span.End(res.err)
	return true
}

// race runs first's exchange of req and its hedges. See the file's comment.
func (l *Call) race(first *Exchange, req *http.Request, delay time.Duration) (*http.Response, *Exchange, error) {
	pol := l.p.cfg.Hedge
	h := first.route
	results := make(chan attemptResult, pol.MaxAttempts) // each attempt sends once: never blocks
	atts := make([]attempt, 0, pol.MaxAttempts)
	running := 0
	base := time.Now()
	// wrote[i] is when attempt i's write ended, as time since base (+1, so
	// that 0 means not yet): set by its WroteRequest hook, on whichever
	// goroutine writes, and read here when the hedge timer fires.
	wrote := make([]atomic.Int64, pol.MaxAttempts)
	start := func(x *Exchange, r *http.Request) {
		ctx, cancel := context.WithCancel(l.ctx)
		x.cancel, x.hedged, x.quiet = cancel, len(atts) > 0, true
		i := len(atts)
		atts = append(atts, attempt{x: x, span: l.tel.StartAttempt(i, x.hedged)})
		if l.foreign {
			// A bubbled caller's exchange may be written on the pool's
			// home, whose clock is not the bubble's: its start stands in
			// for its write.
			wrote[i].Store(int64(time.Since(base)) + 1)
		} else {
			ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
				wrote[i].CompareAndSwap(0, int64(time.Since(base))+1)
			}})
		}
		r = r.WithContext(ctx)
		running++
		go func() { // owned by race, which receives every attempt's result before it returns
			resp, err := x.RoundTrip(r)
			results <- attemptResult{i: i, resp: resp, err: err}
		}()
	}
	// written reports when the latest attempt's write ended, and false
	// while it goes on.
	written := func() (time.Time, bool) {
		w := wrote[len(atts)-1].Load()
		return base.Add(time.Duration(w - 1)), w != 0
	}
	start(first, req)

	timer := time.NewTimer(delay)
	defer timer.Stop()
	timerC := timer.C
	var asked *Exchange // a hedge's lease asked of the route, not yet answered
	winner := -1
	for winner < 0 && running > 0 {
		var answered <-chan struct{}
		if asked != nil {
			answered = readyOf(l.p, l.foreign, &asked.ticket)
		}
		select {
		case res := <-results:
			running--
			a := &atts[res.i]
			if a.end(res) {
				// One that failed before its write ended counts as written
				// now: a further attempt may still be asked for.
				wrote[res.i].CompareAndSwap(0, int64(time.Since(base))+1)
				continue
			}
			winner = res.i
			l.settle(a, res.resp)
			return l.finish(atts, winner, asked, res.resp, results, running)
		case <-timerC:
			timerC = nil
			at, ok := written()
			if wait := time.Until(at.Add(delay)); !ok || wait > 0 {
				// Still writing (look again a delay later), or written
				// since the timer was set: the delay counts from the write.
				if !ok {
					wait = delay
				}
				timer.Reset(wait)
				timerC = timer.C
				continue
			}
			asked = l.askHedge(h, atts, at)
			if asked == nil { // no room under MaxConcurrentRequests: ask again after another delay
				timer.Reset(delay)
				timerC = timer.C
			}
		case <-answered:
			x := asked
			asked = nil
			lease, err, _ := x.ticket.Result()
			var refused *HedgeRefused
			switch {
			case errors.As(err, &refused):
				l.p.admission.Release() // the one askHedge took for it
				if !refused.RetryAt.IsZero() {
					timer.Reset(max(0, time.Until(refused.RetryAt)))
					timerC = timer.C
				}
			case err != nil: // the route stopped, or a dial failed: no hedge
				l.p.admission.Release()
			default:
				x.leased(lease)
				r, ok := rewound(req)
				if !ok { // GetBody failed: this attempt cannot go
					x.GiveBack()
					l.p.admission.Release()
					break
				}
				start(x, r)
				if len(atts) < pol.MaxAttempts {
					timer.Reset(delay)
					timerC = timer.C
				}
			}
		}
	}
	return l.finish(atts, winner, asked, nil, results, running)
}

// askHedge asks the route for a hedged attempt's lease, after taking one of
// MaxConcurrentRequests for it without waiting; nil when there is none.
func (l *Call) askHedge(h *routeHandle, atts []attempt, lastWritten time.Time) *Exchange {
	if !l.p.admission.TryAcquire() {
		return nil
	}
	conns := make([]uint64, len(atts))
	for i := range atts {
		conns[i] = atts[i].x.got.ConnID
	}
	x := &Exchange{p: l.p, tel: l.tel, trace: l.trace, gzip: l.gzip, route: h, foreign: l.foreign}
	x.leaseReq = LeaseRequest{Ticket: &x.ticket, Trace: x.trace,
		Hedge: &HedgeAsk{Attempts: hedge.Attempts{Written: len(atts), LastWritten: lastWritten}, Conns: conns}}
	x.post(&x.leaseReq) // from the pool's home for a bubbled caller, as every lease
	return x
}

// settle makes a's exchange the request's: its end now tells the request's
// telemetry, or has told it already if it ended while it raced.
func (l *Call) settle(a *attempt, resp *http.Response) {
	a.span.End(nil)
	x := a.x
	x.quiet = false
	if x.hedged {
		x.post(&HedgeWon{})
		l.tel.HedgeWon()
	}
	if x.endedQuiet {
		l.tel.ExchangeDone()
	}
}

// finish ends the race: a hedge's lease still asked for is given back, the
// attempts other than winner (-1: none won) are cancelled (the one place
// that cancels an attempt but its own end: the winner's context ends with
// its exchange) and waited for (a response that came meanwhile is closed),
// and the admissions of the attempts that failed go back, but for one when
// none won: the request's, which its caller gives back (Call.Leave). It
// returns winner's response and exchange, or the first attempt's error.
func (l *Call) finish(atts []attempt, winner int, asked *Exchange, resp *http.Response, results <-chan attemptResult, running int) (*http.Response, *Exchange, error) {
	if asked != nil {
		asked.GiveBack() // a lease that crossed the cancel goes back untouched
		l.p.admission.Release()
	}
	for i := range atts {
		if i != winner {
			atts[i].x.cancel() // ends a running loser's exchange at once; frees an ended one's context
		}
	}
	for ; running > 0; running-- {
		res := <-results
		a := &atts[res.i]
		if a.end(res) {
			continue
		}
		a.span.End(errLostRace)
		res.resp.Body.Close() // lost: its exchange ends (and gives back its admission) unread
	}
	failed := 0
	for i := range atts {
		if atts[i].err != nil {
			failed++
		}
	}
	if winner < 0 {
		failed-- // the request's own admission stays for its caller
	}
	for range failed {
		l.p.admission.Release()
	}
	if winner >= 0 {
		return resp, atts[winner].x, nil
	}
	return nil, nil, atts[0].err
}

// errLostRace ends the span of an attempt whose response head came after
// the winner's.
var errLostRace = errors.New("connactor: hedged attempt lost the race")
