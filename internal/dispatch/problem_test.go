package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
)

// decider is a Handler that tells each notification on events, in order,
// and decides non-fatal problems with decide (nil: carry on).
type decider struct {
	events chan event
	decide func() bool
}

type event struct {
	what string // "problem", "fatal" or "response"
	err  error
}

func newDecider(decide func() bool) *decider {
	return &decider{events: make(chan event, 4), decide: decide}
}

func (d *decider) OnResponse(_ *Handle, resp *http.Response) {
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d.events <- event{what: "response"}
}

func (d *decider) OnProblem(_ *Handle, err error, fatal bool) bool {
	if fatal {
		d.events <- event{"fatal", err}
		return false
	}
	d.events <- event{"problem", err}
	return d.decide != nil && d.decide()
}

// take waits for the next two notifications: the non-fatal problem and the
// final one.
func (d *decider) take() (first, final event) {
	return <-d.events, <-d.events
}

// staleOnce is a server whose first request fails as on a stale re-used
// connection, and that answers the rest.
func staleOnce(f *fakeTrip) {
	var n atomic.Int64
	f.serve = func(context.Context, *http.Request) (*http.Response, error) {
		if n.Add(1) == 1 {
			return nil, errStale
		}
		return okResponse("ok"), nil
	}
}

func TestAReplayIsANonFatalProblemBeforeTheResponse(t *testing.T) {
	f := newFakeTrip(1)
	staleOnce(f)
	d, _ := newTestDispatcher(t, f, 1, nil)
	dc := newDecider(nil)
	h := d.Send(newGet(t, "/"), dc)
	first, final := dc.take()
	if _, err := h.Await(t.Context()); err != nil {
		t.Fatalf("Await: %v", err)
	}
	if first.what != "problem" || !errors.Is(first.err, errStale) || final.what != "response" {
		t.Fatalf("notifications %v then %v, want the stale connection's problem, then the response", first, final)
	}
	if w := f.written.Load(); w != 2 {
		t.Fatalf("%d requests written, want 2: the replay went out", w)
	}
}

func TestHandlerMayEscalateANonFatalProblem(t *testing.T) {
	for _, tc := range []struct {
		name    string
		decide  func() bool
		wantErr error
	}{
		{"by returning true", func() bool { return true }, errStale},
		{"by panicking", func() bool { panic("handler bug in OnProblem") }, ErrHandlerPanicked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeTrip(1)
			staleOnce(f)
			d, _ := newTestDispatcher(t, f, 1, nil)
			dc := newDecider(tc.decide)
			h := d.Send(newGet(t, "/"), dc)
			first, final := dc.take()
			if _, err := h.Await(t.Context()); !errors.Is(err, tc.wantErr) {
				t.Fatalf("Await: %v, want %v", err, tc.wantErr)
			}
			if first.what != "problem" || final.what != "fatal" || !errors.Is(final.err, tc.wantErr) {
				t.Fatalf("notifications %v then %v, want a problem, then a fatal one with %v", first, final, tc.wantErr)
			}
			if w := f.written.Load(); w != 1 {
				t.Fatalf("%d requests written, want 1: an escalated problem is not replayed", w)
			}
			f.assertSettled(t)
		})
	}
}

// A Handle without a handler has nobody to ask: its request carries on.
func TestWithoutAHandlerNonFatalProblemsCarryOn(t *testing.T) {
	f := newFakeTrip(1)
	staleOnce(f)
	d, _ := newTestDispatcher(t, f, 1, nil)
	h := d.Send(newGet(t, "/"), nil)
	if _, err := h.Await(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if w := f.written.Load(); w != 2 {
		t.Fatalf("%d requests written, want 2", w)
	}
}

// An early response (the server answered before the body was sent) is a
// non-fatal problem before OnResponse; made fatal, the response is discarded
// with its connection.
func TestAnEarlyResponseIsANonFatalProblemBeforeTheResponse(t *testing.T) {
	for _, escalate := range []bool{false, true} {
		t.Run(fmt.Sprintf("escalate=%v", escalate), func(t *testing.T) {
			f := newFakeTrip(1)
			f.serve = func(context.Context, *http.Request) (*http.Response, error) {
				resp := okResponse("")
				resp.StatusCode = http.StatusRequestEntityTooLarge
				resp.Header.Set("Early", "1")
				return resp, nil
			}
			d, _ := newTestDispatcher(t, f, 1, nil)
			dc := newDecider(func() bool { return escalate })
			h := d.Send(newGet(t, "/"), dc)
			first, final := dc.take()
			want := "response"
			if escalate {
				want = "fatal"
			}
			if first.what != "problem" || !errors.Is(first.err, errEarly) || final.what != want {
				t.Fatalf("notifications %v then %v, want the early response's problem, then %s", first, final, want)
			}
			if _, err := h.Await(t.Context()); escalate != errors.Is(err, errEarly) {
				t.Fatalf("Await: %v", err)
			}
			if cl, r := f.closed.Load(), f.reused.Load(); cl != 1 || r != 0 {
				t.Fatalf("%d connections closed and %d re-used, want 1 and 0", cl, r)
			}
			f.assertSettled(t)
		})
	}
}

// Abort while the handler decides a non-fatal problem: the request does not
// wait for the decision, ends unreplayed, and nothing more is notified.
func TestAbortDuringANonFatalProblemEndsTheRequest(t *testing.T) {
	f := newFakeTrip(1)
	staleOnce(f)
	d, _ := newTestDispatcher(t, f, 1, nil)
	deciding, decide := make(chan struct{}), make(chan struct{})
	var fatal atomic.Int64
	h := d.Send(newGet(t, "/"), HandlerFuncs{Problem: func(_ *Handle, _ error, isFatal bool) bool {
		if isFatal {
			fatal.Add(1)
			return false
		}
		close(deciding)
		<-decide
		return false
	}})
	<-deciding
	h.Abort() // returns before the handler decides
	close(decide)
	if _, err := h.Await(t.Context()); !errors.Is(err, ErrAborted) || h.Linked() {
		t.Fatalf("Await: %v, linked %v; want ErrAborted, unlinked", err, h.Linked())
	}
	if w := f.written.Load(); w != 1 {
		t.Fatalf("%d requests written, want 1: an aborted request is not replayed", w)
	}
	untilWorkersRanAll(t, d, 1)
	if n := fatal.Load(); n != 0 {
		t.Fatalf("%d fatal notifications after Abort, want 0", n)
	}
}
