package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// Responses, bodiless responses and failures, mixed: each Handle gets exactly
// one final notification, is unlinked once nothing holds a connection for
// it, and every connection comes back.
func TestEachOf500HandlesGetsExactlyOneFinalNotification(t *testing.T) {
	f := newFakeTrip(8)
	errRefused := errors.New("connection refused")
	f.serve = func(_ context.Context, req *http.Request) (*http.Response, error) {
		i, _ := strconv.Atoi(req.URL.Query().Get("i"))
		switch i % 3 {
		case 0:
			return okResponse("hello " + strconv.Itoa(i)), nil
		case 1:
			return &http.Response{StatusCode: http.StatusNoContent, Header: http.Header{}, Body: http.NoBody}, nil
		}
		return nil, errRefused
	}
	d, stop := newTestDispatcher(t, f, 4, nil)
	tl := newTally(500)
	var hs []*Handle
	for i := range 500 {
		hs = append(hs, d.Send(newGet(t, fmt.Sprintf("/x?i=%d", i)), tl))
	}
	tl.done.Wait()
	for i, h := range hs {
		_, err := h.Await(t.Context())
		if (i%3 == 2) != errors.Is(err, errRefused) {
			t.Fatalf("request %d: Await %v", i, err)
		}
		if h.Linked() {
			t.Fatalf("request %d still linked after its outcome was handled", i)
		}
	}
	stop() // the workers run what is queued, then stop: no late notification can follow
	if len(tl.finals) != 500 || tl.nonFatal != 0 {
		t.Fatalf("%d Handles notified, %d non-fatal problems; want 500 and 0", len(tl.finals), tl.nonFatal)
	}
	for i, h := range hs {
		if n := tl.finals[h]; n != 1 {
			t.Fatalf("request %d got %d final notifications, want 1", i, n)
		}
	}
	f.assertSettled(t)
}

func TestPanickingHandlerCostsOnlyItsOwnHandle(t *testing.T) {
	f := newFakeTrip(4)
	logs := &panicRecords{}
	d, _ := newTestDispatcher(t, f, 2, logs)

	var notified atomic.Int64
	var wg sync.WaitGroup
	handler := HandlerFuncs{Response: func(h *Handle, resp *http.Response) {
		defer wg.Done()
		i, _ := strconv.Atoi(h.Request().URL.Query().Get("i"))
		if i%10 == 0 {
			panic(fmt.Sprintf("handler bug on response %d", i))
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		notified.Add(1)
	}}
	var handles []*Handle
	wg.Add(100)
	for i := range 100 {
		handles = append(handles, d.Send(newGet(t, fmt.Sprintf("/?i=%d", i)), handler))
	}
	wg.Wait()
	if n := notified.Load(); n != 90 {
		t.Fatalf("%d handlers completed, want 90", n)
	}
	// The workers are healthy: a new round is notified in full.
	tl := newTally(50)
	for range 50 {
		d.Send(newGet(t, "/"), tl)
	}
	tl.done.Wait()
	untilWorkersRanAll(t, d, 2) // each panic has cost its Handle

	for i, h := range handles {
		_, err := h.Await(t.Context())
		if i%10 == 0 {
			if !errors.Is(err, ErrHandlerPanicked) {
				t.Fatalf("handle %d: Await %v, want ErrHandlerPanicked", i, err)
			}
		} else if err != nil {
			t.Fatalf("handle %d: %v", i, err)
		}
		if h.Linked() {
			t.Fatalf("handle %d linked after its response was handled", i)
		}
	}
	if n := logs.n.Load(); n != 10 {
		t.Fatalf("%d panics logged, want 10", n)
	}
	// The panicking Handles' responses were discarded with their
	// connections: closed, never re-used.
	if c, r := f.closed.Load(), f.reused.Load(); c != 10 || r != 142 {
		t.Fatalf("%d connections closed and %d re-used, want 10 and 142", c, r)
	}
	f.assertSettled(t)
}

func TestBlockedHandlerDelaysNeitherAwaitNorOtherNotifications(t *testing.T) {
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d workers", workers), func(t *testing.T) {
			f := newFakeTrip(8)
			d, _ := newTestDispatcher(t, f, workers, nil)
			sleeping, wake := make(chan struct{}), make(chan struct{})
			var wakeOnce sync.Once
			t.Cleanup(func() { wakeOnce.Do(func() { close(wake) }) }) // before Close, which waits for handlers
			var sleeperReturned atomic.Bool
			sleeper := d.Send(newGet(t, "/sleeper"), HandlerFuncs{Response: func(_ *Handle, resp *http.Response) {
				resp.Body.Close()
				close(sleeping)
				<-wake // sleeps as long as the test needs: longer than any fixed second
				sleeperReturned.Store(true)
			}})
			<-sleeping

			var notified sync.WaitGroup
			var hs []*Handle
			for range 50 {
				notified.Add(1)
				hs = append(hs, d.Send(newGet(t, "/other"), HandlerFuncs{Response: func(_ *Handle, resp *http.Response) {
					resp.Body.Close()
					notified.Done()
				}}))
			}
			var awaited sync.WaitGroup
			for _, h := range hs {
				awaited.Go(func() {
					if _, err := h.Await(t.Context()); err != nil {
						t.Error(err)
					}
					if workers == 1 {
						// The only worker sleeps: the application processes
						// responses as they arrive, as it must, or the 8
						// connections run dry.
						h.Close()
					}
				})
			}
			awaited.Wait()
			if sleeperReturned.Load() {
				t.Fatal("the sleeping handler returned before the other Awaits")
			}
			if workers > 1 {
				notified.Wait() // the other worker delivers every other notification
				if sleeperReturned.Load() {
					t.Fatal("the sleeping handler returned before the other notifications")
				}
			}
			wakeOnce.Do(func() { close(wake) })
			sleeper.Close()
		})
	}
}

// A nil request fails as the request path fails it: a fatal problem.
func TestNilRequestIsAFatalProblem(t *testing.T) {
	d, _ := newTestDispatcher(t, newFakeTrip(0), 1, nil)
	problems := make(chan error, 1)
	h := d.Send(nil, HandlerFuncs{Problem: func(_ *Handle, err error, fatal bool) bool {
		if fatal {
			problems <- err
		}
		return false
	}})
	if err := <-problems; !errors.Is(err, errNilRequest) {
		t.Fatalf("problem %v, want the request path's error", err)
	}
	if _, err := h.Await(t.Context()); !errors.Is(err, errNilRequest) || h.Linked() || h.Request() != nil {
		t.Fatalf("Await %v, linked %v, request %v", err, h.Linked(), h.Request())
	}
}

// Send never blocks, whatever is busy: the request waits on its own goroutine.
func TestSendNeverBlocksWhenEveryConnectionAndWorkerIsBusy(t *testing.T) {
	f := newFakeTrip(1)
	f.queuedCh = make(chan string, 300)
	f.serve = hang
	d, _ := newTestDispatcher(t, f, 1, nil)
	for range 300 {
		d.Send(newGet(t, "/"), nil)
	}
	for range 300 {
		<-f.queuedCh
	}
	d.AbortAll()
	// The connection freed by the first abort may be granted to requests
	// stopped but not yet cancelled: they give it back unused.
	if w, l, g := f.written.Load(), f.left.Load(), f.givenBack.Load(); w != 1 || l+g != 299 {
		t.Fatalf("after AbortAll: %d written, %d left the queue, %d gave their connection back; want 1 and 299 in all", w, l, g)
	}
	f.assertSettled(t)
}

func TestSendOnAClosedDispatcherFailsAtOnceWithErrClosed(t *testing.T) {
	for _, how := range []string{"closed", "closing"} {
		t.Run(how, func(t *testing.T) {
			var wg sync.WaitGroup
			d := New(Config{RoundTrip: newFakeTrip(0), Workers: 1, Go: wg.Go, ErrClosed: errClosed,
				Closing: func() bool { return how == "closing" }})
			if how == "closed" {
				d.Close()
			}
			var c counter
			body := &closeCounter{}
			req := newGet(t, "/")
			req.Body = body
			h := d.Send(req, &c)
			if _, err := h.Await(t.Context()); !errors.Is(err, errClosed) {
				t.Fatalf("Await: %v, want ErrClosed", err)
			}
			if h.Linked() || c.n.Load() != 0 || body.n.Load() != 1 {
				t.Fatalf("a refused handle must be unlinked and silent, its body closed: linked %v, %d notifications, body closed %d times",
					h.Linked(), c.n.Load(), body.n.Load())
			}
			h.Abort() // harmless
			d.Close()
			wg.Wait()
		})
	}
}

type closeCounter struct{ n atomic.Int64 }

func (c *closeCounter) Read([]byte) (int, error) { return 0, io.EOF }
func (c *closeCounter) Close() error             { c.n.Add(1); return nil }

// Close aborts what is linked, silently; what was already notified runs.
func TestCloseAbortsLinkedHandlesSilently(t *testing.T) {
	f := newFakeTrip(2)
	f.queuedCh = make(chan string, 20)
	f.serve = hang
	var wg sync.WaitGroup
	d := New(Config{RoundTrip: f, Workers: 2, Go: wg.Go, ErrClosed: errClosed})
	var c counter
	var hs []*Handle
	for range 20 {
		hs = append(hs, d.Send(newGet(t, "/"), &c))
	}
	for range 20 {
		<-f.queuedCh
	}
	d.Close()
	wg.Wait() // every request's goroutine is over
	for _, h := range hs {
		if _, err := h.Await(t.Context()); !errors.Is(err, ErrAborted) || !errors.Is(err, errClosed) || h.Linked() {
			t.Fatalf("Await after Close: %v, linked %v; want ErrAborted and ErrClosed, unlinked", err, h.Linked())
		}
	}
	if n := c.n.Load(); n != 0 {
		t.Fatalf("%d notifications after Close, want 0", n)
	}
	f.assertSettled(t)
}

// GoIfOpen starts goroutines until Close, never after.
func TestGoIfOpenRefusesOnceClosed(t *testing.T) {
	var wg sync.WaitGroup
	d := New(Config{RoundTrip: newFakeTrip(0), Workers: 1, Go: wg.Go, ErrClosed: errClosed})
	ran := make(chan struct{})
	if !d.GoIfOpen(func() { close(ran) }) {
		t.Fatal("GoIfOpen refused before Close")
	}
	<-ran
	d.Close()
	if d.GoIfOpen(func() { t.Error("started after Close") }) {
		t.Fatal("GoIfOpen started a goroutine after Close")
	}
	wg.Wait()
}

// untilWorkersRanAll returns once every notification queued before it has
// run: it queues one for each of the dispatcher's workers, which wait for
// each other. When all of them run at once, no worker runs anything else.
func untilWorkersRanAll(t *testing.T, d *Dispatcher, workers int) {
	t.Helper()
	var meet, met sync.WaitGroup
	meet.Add(workers)
	met.Add(workers)
	barrier := HandlerFuncs{Response: func(_ *Handle, resp *http.Response) {
		resp.Body.Close()
		meet.Done()
		meet.Wait()
		met.Done()
	}}
	for range workers {
		d.Send(newGet(t, "/barrier"), barrier)
	}
	met.Wait()
}
