package dispatch

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// holdOne makes f's one connection busy with a request that the test ends by
// closing release: its response is then closed, and the connection put back.
func holdOne(t *testing.T, d *Dispatcher, f *fakeTrip) (release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	holding := make(chan struct{})
	serve := f.serve
	f.serve = func(ctx context.Context, req *http.Request) (*http.Response, error) {
		if req.URL.Path == "/hold" {
			close(holding)
			<-release
		}
		return serve(ctx, req)
	}
	h := d.Send(newGet(t, "/hold"), HandlerFuncs{Response: func(_ *Handle, resp *http.Response) { resp.Body.Close() }})
	<-holding
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		h.Close()
	})
	return release
}

// Abort before the lease: the request leaves its queue and is never written;
// the Handle hears nothing.
func TestAbortBeforeTheLeaseLeavesTheQueueUnwritten(t *testing.T) {
	f := newFakeTrip(1)
	d, _ := newTestDispatcher(t, f, 1, nil)
	holdOne(t, d, f)
	f.queuedCh = make(chan string, 1)

	var c counter
	h := d.Send(newGet(t, "/b"), &c)
	<-f.queuedCh
	h.Abort()
	if l, w := f.left.Load(), f.written.Load(); l != 1 || w != 1 {
		t.Fatalf("after Abort: %d left the queue, %d written; want 1 and 1 (the holder)", l, w)
	}
	if h.Linked() {
		t.Fatal("aborted handle still linked")
	}
	if _, err := h.Await(t.Context()); !errors.Is(err, ErrAborted) {
		t.Fatalf("Await after Abort: %v, want ErrAborted", err)
	}
	if c.n.Load() != 0 {
		t.Fatal("an aborted handle was notified")
	}
}

// Abort as the lease is granted (AbortAll stops every Handle before it
// cancels any): the Leased hook refuses the connection, which goes back
// unused, and nothing is written.
func TestAHandleStoppedBeforeItsLeaseGivesTheConnectionBackUnused(t *testing.T) {
	f := newFakeTrip(1)
	d, _ := newTestDispatcher(t, f, 1, nil)
	release := holdOne(t, d, f)
	f.queuedCh = make(chan string, 1)

	var c counter
	h := d.Send(newGet(t, "/b"), &c)
	<-f.queuedCh
	if !h.markStopped(ErrAborted) { // stopped, not yet cancelled: still in the queue
		t.Fatal("markStopped: already stopped")
	}
	close(release) // the holder's response frees the connection: b is granted it
	<-h.rtDone
	if g, w := f.givenBack.Load(), f.written.Load(); g != 1 || w != 1 {
		t.Fatalf("%d connections given back, %d requests written; want 1 and 1 (the holder)", g, w)
	}
	h.endStopped()
	if _, err := h.Await(t.Context()); !errors.Is(err, ErrAborted) || h.Linked() {
		t.Fatalf("Await: %v, linked %v; want ErrAborted, unlinked", err, h.Linked())
	}
	if c.n.Load() != 0 {
		t.Fatal("an aborted handle was notified")
	}
}

// Abort while leased: the request is on the wire; its context ends with the
// abort's cause, and its connection is closed, not put back.
func TestAbortWhileLeasedClosesTheConnection(t *testing.T) {
	f := newFakeTrip(1)
	f.wireCh = make(chan string, 1)
	causes := make(chan error, 1)
	f.serve = func(ctx context.Context, _ *http.Request) (*http.Response, error) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	}
	d, _ := newTestDispatcher(t, f, 1, nil)
	var c counter
	h := d.Send(newGet(t, "/"), &c)
	<-f.wireCh
	h.Abort()
	if cause := <-causes; !errors.Is(cause, ErrAborted) {
		t.Fatalf("the request's context ended with %v, want ErrAborted", cause)
	}
	if cl, r := f.closed.Load(), f.reused.Load(); cl != 1 || r != 0 {
		t.Fatalf("%d connections closed and %d re-used, want 1 and 0", cl, r)
	}
	if _, err := h.Await(t.Context()); !errors.Is(err, ErrAborted) || h.Linked() {
		t.Fatalf("Await: %v, linked %v; want ErrAborted, unlinked", err, h.Linked())
	}
	if c.n.Load() != 0 {
		t.Fatal("an aborted handle was notified")
	}
	f.assertSettled(t)
}

// Abort after the response: the body is closed after the context ended (not
// drained), so its connection is closed, not re-used; a Close instead puts
// it back.
func TestAbortAfterTheResponseClosesTheConnectionWhereCloseKeepsIt(t *testing.T) {
	for _, how := range []string{"Abort", "Close"} {
		t.Run(how, func(t *testing.T) {
			f := newFakeTrip(1)
			f.serve = func(context.Context, *http.Request) (*http.Response, error) {
				return okResponse("first chunk, and more"), nil
			}
			d, _ := newTestDispatcher(t, f, 1, nil)
			h := d.Send(newGet(t, "/"), nil)
			resp, err := h.Await(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if n, err := resp.Body.Read(make([]byte, 5)); n != 5 || err != nil {
				t.Fatalf("first read: %d bytes, %v", n, err)
			}
			if how == "Abort" {
				h.Abort()
			} else if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			if rest, err := io.ReadAll(resp.Body); err == nil {
				t.Fatalf("body still readable after %s: %q", how, rest)
			}
			wantClosed, wantReused := int64(1), int64(0)
			if how == "Close" {
				wantClosed, wantReused = 0, 1
			}
			if cl, r := f.closed.Load(), f.reused.Load(); cl != wantClosed || r != wantReused {
				t.Fatalf("%d connections closed and %d re-used, want %d and %d", cl, r, wantClosed, wantReused)
			}
			if _, err := h.Await(t.Context()); !errors.Is(err, ErrAborted) || h.Linked() {
				t.Fatalf("Await after %s: %v, linked %v; want ErrAborted, unlinked", how, err, h.Linked())
			}
			f.assertSettled(t)
		})
	}
}

// A Handle whose body was read to its end is over: a late Abort changes
// nothing (the connection went back), and Await keeps reporting the abort.
func TestAbortAfterTheBodyEndedIsHarmless(t *testing.T) {
	f := newFakeTrip(1)
	d, _ := newTestDispatcher(t, f, 1, nil)
	h := d.Send(newGet(t, "/"), nil)
	resp, err := h.Await(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "ok" {
		t.Fatalf("body %q, %v", b, err)
	}
	if h.Linked() {
		t.Fatal("linked after its body ended")
	}
	h.Abort()
	h.Abort()
	if cl, r := f.closed.Load(), f.reused.Load(); cl != 0 || r != 1 {
		t.Fatalf("%d connections closed and %d re-used, want 0 and 1", cl, r)
	}
}

func TestNoNotificationStartsAfterAbortOrClose(t *testing.T) {
	d, _ := newTestDispatcher(t, newFakeTrip(0), 1, nil)
	blocking, release := make(chan struct{}), make(chan struct{})
	blocker := d.Send(newGet(t, "/blocker"), HandlerFuncs{Response: func(_ *Handle, resp *http.Response) {
		resp.Body.Close()
		close(blocking)
		<-release // holds the only handler worker
	}})
	<-blocking

	var late counter
	aborted := d.Send(newGet(t, "/aborted"), &late)
	closed := d.Send(newGet(t, "/closed"), &late)
	for _, h := range []*Handle{aborted, closed} {
		if _, err := h.Await(t.Context()); err != nil { // the outcome is known; its notification is queued
			t.Fatal(err)
		}
	}
	aborted.Abort()
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := closed.Await(t.Context()); !errors.Is(err, ErrAborted) {
		t.Fatalf("Await after Close: %v, want ErrAborted", err)
	}
	close(release)
	blocker.Close()
	untilWorkersRanAll(t, d, 1)
	if n := late.n.Load(); n != 0 {
		t.Fatalf("%d notifications after Abort/Close, want 0", n)
	}
}

// AbortAll with requests on the wire, in the queue and with open bodies:
// nothing is written after it began, every connection comes back (those that
// carried a request closed), and the dispatcher stays usable.
func TestAbortAllLeavesNothingHeldAndWritesNothingMore(t *testing.T) {
	f := newFakeTrip(8)
	f.wireCh = make(chan string, 200)
	f.serve = func(ctx context.Context, req *http.Request) (*http.Response, error) {
		if req.URL.Path == "/open" {
			return &http.Response{StatusCode: 200, Header: http.Header{},
				Body: &blockingBody{first: strings.NewReader("head"), ctx: ctx}}, nil
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	d, _ := newTestDispatcher(t, f, 2, nil)
	var c counter
	var hs []*Handle
	for range 4 {
		h := d.Send(newGet(t, "/open"), nil)
		if _, err := h.Await(t.Context()); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	for range 200 {
		hs = append(hs, d.Send(newGet(t, "/hang"), &c))
	}
	for range 8 {
		<-f.wireCh // 4 bodies open, 4 requests on the wire, 196 waiting
	}
	d.AbortAll()
	if w := f.written.Load(); w != 8 {
		t.Fatalf("%d requests written, want the 8 before AbortAll", w)
	}
	if cl, r := f.closed.Load(), f.reused.Load(); cl != 8 || r != 0 {
		t.Fatalf("%d connections closed and %d re-used, want 8 and 0", cl, r)
	}
	f.assertSettled(t)
	for _, h := range hs {
		if _, err := h.Await(t.Context()); !errors.Is(err, ErrAborted) || h.Linked() {
			t.Fatalf("Await after AbortAll: %v, linked %v; want ErrAborted, unlinked", err, h.Linked())
		}
	}
	f.serve = func(context.Context, *http.Request) (*http.Response, error) { return okResponse("ok"), nil }
	h := d.Send(newGet(t, "/after"), nil)
	if _, err := h.Await(t.Context()); err != nil {
		t.Fatalf("after AbortAll: %v", err)
	}
	h.Close()
	untilWorkersRanAll(t, d, 2)
	if n := c.n.Load(); n != 0 {
		t.Fatalf("%d notifications after AbortAll, want 0", n)
	}
}
