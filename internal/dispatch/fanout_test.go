package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestSendAllReturnsEveryResultInRequestOrderWithinTheLimit(t *testing.T) {
	f := newFakeTrip(8)
	var inFlight, peak atomic.Int64
	f.serve = func(_ context.Context, req *http.Request) (*http.Response, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		return okResponse("r" + req.URL.Query().Get("i")), nil
	}
	d, _ := newTestDispatcher(t, f, 2, nil)
	var reqs []*http.Request
	for i := range 60 {
		reqs = append(reqs, newGet(t, fmt.Sprintf("/?i=%d", i)))
	}
	var reading, peakReading atomic.Int64
	got, err := SendAll(t.Context(), d, reqs, 3, func(resp *http.Response) (string, error) {
		n := reading.Add(1)
		defer reading.Add(-1)
		for p := peakReading.Load(); n > p && !peakReading.CompareAndSwap(p, n); p = peakReading.Load() {
		}
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range got {
		if want := fmt.Sprintf("r%d", i); s != want {
			t.Fatalf("result %d = %q, want %q", i, s, want)
		}
	}
	if p, r := peak.Load(), peakReading.Load(); p > 3 || r > 3 {
		t.Fatalf("%d requests on the wire and %d responses read at once, limit 3", p, r)
	}
	if r := f.reused.Load(); r != 60 {
		t.Fatalf("%d connections re-used, want 60: every response was read and closed", r)
	}
	f.assertSettled(t)
}

func TestSendAllAbortsTheRestOnTheFirstError(t *testing.T) {
	f := newFakeTrip(8)
	f.serve = func(ctx context.Context, req *http.Request) (*http.Response, error) {
		if req.URL.Path == "/fail" {
			resp := okResponse("")
			resp.StatusCode = http.StatusInternalServerError
			return resp, nil
		}
		// The rest never comes: only an abort ends this request.
		return &http.Response{StatusCode: 200, Header: http.Header{},
			Body: &blockingBody{first: strings.NewReader("slow"), ctx: ctx}}, nil
	}
	d, _ := newTestDispatcher(t, f, 2, nil)
	var reqs []*http.Request
	for i := range 30 {
		path := "/slow"
		if i == 3 {
			path = "/fail"
		}
		reqs = append(reqs, newGet(t, path))
	}
	errFailed := errors.New("status 500")
	_, err := SendAll(t.Context(), d, reqs, 5, func(resp *http.Response) (string, error) {
		if resp.StatusCode != 200 {
			return "", errFailed
		}
		b, err := io.ReadAll(resp.Body) // blocks until the fan-out aborts this request
		return string(b), err
	})
	if !errors.Is(err, errFailed) {
		t.Fatalf("SendAll: %v, want the first error", err)
	}
	if w := f.written.Load(); w > 5 {
		t.Fatalf("%d requests written; at most the 4 sent beside the failing one, and it", w)
	}
	if cl, r := f.closed.Load(), f.reused.Load(); cl != f.written.Load() || r != 0 {
		t.Fatalf("%d connections closed and %d re-used, want every one of the %d written closed", cl, r, f.written.Load())
	}
	f.assertSettled(t)
}

func TestSendAllStopsWhenItsContextEnds(t *testing.T) {
	f := newFakeTrip(0)
	f.wireCh = make(chan string, 3)
	f.serve = hang
	d, _ := newTestDispatcher(t, f, 1, nil)
	ctx, cancel := context.WithCancel(context.Background())
	body := &closeCounter{}
	post, _ := http.NewRequest(http.MethodPost, "http://fake.test/", body)
	reqs := []*http.Request{newGet(t, "/"), newGet(t, "/"), post}
	var wg sync.WaitGroup
	var err error
	wg.Go(func() {
		_, err = SendAll(ctx, d, reqs, 2, func(*http.Response) (int, error) { return 0, nil })
	})
	<-f.wireCh
	<-f.wireCh // both requests within the limit are on the wire
	cancel()
	wg.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("SendAll: %v, want context.Canceled", err)
	}
	if w, n := f.written.Load(), body.n.Load(); w != 2 || n != 1 {
		t.Fatalf("%d requests written and the third's body closed %d times, want 2 and 1", w, n)
	}
	f.assertSettled(t)
}

func TestSendAllOfNothingReturnsAnEmptySlice(t *testing.T) {
	d, _ := newTestDispatcher(t, newFakeTrip(0), 1, nil)
	got, err := SendAll(t.Context(), d, nil, 0, func(*http.Response) (int, error) { return 0, nil })
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("SendAll(nil): %v, %v; want an empty slice", got, err)
	}
}

// A panic in read reaches the caller, after the rest is aborted and the
// response being read is discarded with its connection.
func TestSendAllReRaisesAPanicInRead(t *testing.T) {
	f := newFakeTrip(0)
	d, _ := newTestDispatcher(t, f, 1, nil)
	reqs := []*http.Request{newGet(t, "/a"), newGet(t, "/b")}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "reader bug") {
			t.Fatalf("recovered %v, want the panic of read", r)
		}
		if w, cl := f.written.Load(), f.closed.Load(); w != 1 || cl != 1 {
			t.Fatalf("%d requests written and %d connections closed, want 1 and 1: the panicking read's response discarded, the rest never sent", w, cl)
		}
		f.assertSettled(t)
	}()
	SendAll(t.Context(), d, reqs, 1, func(*http.Response) (int, error) { panic("reader bug") })
	t.Fatal("SendAll returned")
}
