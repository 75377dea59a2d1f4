package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

func TestSendAllReturnsEveryResultInRequestOrderWithinTheLimit(t *testing.T) {
	var inFlight, peak atomic.Int64
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		io.WriteString(w, "r"+r.URL.Query().Get("i"))
	})
	c := newTestClient(t, Config{MaxConnsPerRoute: 8})
	var reqs []*http.Request
	for i := 0; i < 60; i++ {
		reqs = append(reqs, newGet(t, fmt.Sprintf("%s/?i=%d", srv.URL, i)))
	}
	got, err := SendAll(awaitCtx(t), c, reqs, 3, func(resp *http.Response) (string, error) {
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
	if p := peak.Load(); p > 3 {
		t.Fatalf("the server saw %d requests at once, limit 3", p)
	}
	if st := c.Stats(); st.Leased != 0 || st.InFlight != 0 {
		t.Fatalf("after SendAll: %+v", st)
	}
}

func TestSendAllAbortsTheRestOnTheFirstError(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "slow")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes: only an abort ends this request
	})
	c := newTestClient(t, Config{MaxConnsPerRoute: 8})
	var reqs []*http.Request
	for i := 0; i < 30; i++ {
		path := "/slow"
		if i == 3 {
			path = "/fail"
		}
		reqs = append(reqs, newGet(t, srv.URL+path))
	}
	errFailed := errors.New("status 500")
	var reading atomic.Int64
	_, err := SendAll(awaitCtx(t), c, reqs, 5, func(resp *http.Response) (string, error) {
		if resp.StatusCode != 200 {
			return "", errFailed
		}
		reading.Add(1)
		b, err := io.ReadAll(resp.Body) // blocks until the fan-out aborts this request
		return string(b), err
	})
	if !errors.Is(err, errFailed) {
		t.Fatalf("SendAll: %v, want the first error", err)
	}
	if n := srv.count("/slow"); n > 4 {
		t.Fatalf("the server saw %d slow requests; at most the 4 sent beside the failing one", n)
	}
	if st := c.Stats(); st.Leased != 0 || st.Pending != 0 || st.InFlight != 0 {
		t.Fatalf("after SendAll failed: leased %d pending %d in flight %d, want 0", st.Leased, st.Pending, st.InFlight)
	}
}

func TestSendAllStopsWhenItsContextEnds(t *testing.T) {
	seen := make(chan struct{}, 3)
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		seen <- struct{}{}
		<-r.Context().Done()
	})
	c := newTestClient(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	post, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("never sent"))
	reqs := []*http.Request{newGet(t, srv.URL), newGet(t, srv.URL), post}
	done := make(chan error, 1)
	go func() { // owned by the test, which receives its result
		_, err := SendAll(ctx, c, reqs, 2, func(*http.Response) (int, error) { return 0, nil })
		done <- err
	}()
	<-seen
	<-seen // both requests within the limit are on the server
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("SendAll: %v, want context.Canceled", err)
	}
	if n := srv.count("/"); n != 2 {
		t.Fatalf("the server saw %d requests, want the 2 within the limit", n)
	}
	if st := c.Stats(); st.Leased != 0 || st.InFlight != 0 {
		t.Fatalf("after SendAll: %+v", st)
	}
}
