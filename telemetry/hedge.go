package telemetry

import (
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Attempt is the telemetry of one attempt of a hedged request: a child span
// of the request's, named "attempt", with AttrHedge and AttrAttempt. The nil
// *Attempt records nothing.
type Attempt struct {
	span trace.Span
}

// StartAttempt starts the telemetry of the request's attempt number n (0 =
// the first), hedged or not, and counts a hedged one
// (connactor.request.hedges). It returns nil when the request's span does
// not record. Called on the request's goroutine.
func (r *Request) StartAttempt(n int, hedged bool) *Attempt {
	if r == nil {
		return nil
	}
	if hedged {
		r.t.hedges.Add(r.ctx, 1, r.route.opt)
	}
	if !r.recording {
		return nil
	}
	tracer := r.t.currentTracer()
	if tracer == nil {
		return nil
	}
	_, span := tracer.Start(r.ctx, "attempt", trace.WithAttributes(AttrHedge.Bool(hedged), AttrAttempt.Int(n)))
	return &Attempt{span: span}
}

// End ends the attempt's span: with an error status when err is not nil
// (it failed, was cancelled, or lost the race).
func (a *Attempt) End(err error) {
	if a == nil {
		return
	}
	if err != nil {
		a.span.SetStatus(codes.Error, err.Error())
	}
	a.span.End()
}

// HedgeWon records that the request's response came from a hedged attempt
// (connactor.request.hedge_wins).
func (r *Request) HedgeWon() {
	if r == nil {
		return
	}
	r.t.hedgeWins.Add(r.ctx, 1, r.route.opt)
}
