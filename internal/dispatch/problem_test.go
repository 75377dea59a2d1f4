package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// problemLog records a Handle's notifications in order, and decides
// non-fatal problems as told.
type problemLog struct {
	mu       sync.Mutex
	events   []string
	errs     []error
	final    chan struct{}
	escalate bool
	panics   bool
}

func newProblemLog(escalate, panics bool) *problemLog {
	return &problemLog{final: make(chan struct{}), escalate: escalate, panics: panics}
}

func (p *problemLog) add(e string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, e)
	p.errs = append(p.errs, err)
}

func (p *problemLog) OnResponse(_ *Handle, resp *http.Response) {
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	p.add("response", nil)
	close(p.final)
}

func (p *problemLog) OnProblem(_ *Handle, err error, fatal bool) bool {
	if fatal {
		p.add("fatal", err)
		close(p.final)
		return false
	}
	p.add("problem", err)
	if p.panics {
		panic("handler bug in OnProblem")
	}
	return p.escalate
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
	p := newProblemLog(false, false)
	h := d.Send(newGet(t, "/"), p)
	<-p.final
	if _, err := h.Await(awaitCtx(t)); err != nil {
		t.Fatalf("Await: %v", err)
	}
	if fmt.Sprint(p.events) != "[problem response]" || !errors.Is(p.errs[0], errStale) {
		t.Fatalf("notifications %v (%v), want [problem response] with the stale connection's error", p.events, p.errs)
	}
	if w := f.written.Load(); w != 2 {
		t.Fatalf("%d requests written, want 2: the replay went out", w)
	}
}

func TestHandlerMayEscalateANonFatalProblem(t *testing.T) {
	for _, tc := range []struct {
		name    string
		panics  bool
		wantErr error
	}{
		{"by returning true", false, errStale},
		{"by panicking", true, ErrHandlerPanicked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeTrip(1)
			staleOnce(f)
			d, _ := newTestDispatcher(t, f, 1, nil)
			p := newProblemLog(true, tc.panics)
			h := d.Send(newGet(t, "/"), p)
			<-p.final
			if _, err := h.Await(awaitCtx(t)); !errors.Is(err, tc.wantErr) {
				t.Fatalf("Await: %v, want %v", err, tc.wantErr)
			}
			if fmt.Sprint(p.events) != "[problem fatal]" || !errors.Is(p.errs[1], tc.wantErr) {
				t.Fatalf("notifications %v (%v), want [problem fatal] with %v", p.events, p.errs, tc.wantErr)
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
	if _, err := h.Await(awaitCtx(t)); err != nil {
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
			p := newProblemLog(escalate, false)
			h := d.Send(newGet(t, "/"), p)
			<-p.final
			want := "[problem response]"
			if escalate {
				want = "[problem fatal]"
			}
			if fmt.Sprint(p.events) != want || !errors.Is(p.errs[0], errEarly) {
				t.Fatalf("notifications %v (%v), want %s, first with the early response's error", p.events, p.errs, want)
			}
			if _, err := h.Await(awaitCtx(t)); escalate != errors.Is(err, errEarly) {
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
	if _, err := h.Await(awaitCtx(t)); !errors.Is(err, ErrAborted) || h.Linked() {
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
