package client

import (
	"io"
	"sync"
	"testing"
	"time"
)

// The retry budget refuses replays beyond its share: the server counts the
// requests, and the replays it sees stay within the budget.
func TestRetryBudgetCapsReplays(t *testing.T) {
	// Every connection answers one request, then drops the next one unanswered:
	// each re-used connection fails a GET before any response byte.
	srv := newRawServer(t, func(c *rawConn) {
		if _, _, err := c.readRequest(); err != nil {
			return
		}
		c.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		c.readHead() // the second request: dropped
	})
	t.Cleanup(srv.Close)
	c := newClient(t, Config{MaxConnsPerRoute: 1,
		RetryBudget: RetryBudget{Ratio: 0.1, MinPerSecond: 1, Window: 10 * time.Second}})
	failures := 0
	for i := 0; i < 100; i++ {
		resp, err := c.RoundTrip(newGet(t, srv.URL()))
		if err != nil {
			failures++
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	st := c.Stats()
	// 100 requests: 10% of the requests, or 10 (1 a second over 10 s).
	if st.Retries > 10 || st.RetriesRefused == 0 || st.Retries+st.RetriesRefused == 0 {
		t.Fatalf("retries %d refused %d", st.Retries, st.RetriesRefused)
	}
	t.Logf("100 requests: %d replays allowed, %d refused, %d failed", st.Retries, st.RetriesRefused, failures)
}

func TestRetryBudgetCountsOverASlidingWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newRetryBudget(RetryBudget{Ratio: 0.2, MinPerSecond: 1, Window: 10 * time.Second})
	b.now = func() time.Time { return now }
	for i := 0; i < 200; i++ {
		b.request(now)
	}
	allowed := 0
	for b.allow() {
		allowed++
	}
	if allowed != 40 {
		t.Fatalf("%d replays allowed for 200 requests at 20%%", allowed)
	}
	now = now.Add(11 * time.Second) // the window slid past them: only the floor is left
	allowed = 0
	for b.allow() {
		allowed++
	}
	if allowed != 10 {
		t.Fatalf("%d replays on the floor of 1/s over 10s", allowed)
	}
	if a, r := b.totals(); a != 50 || r != 2 {
		t.Fatalf("totals %d allowed, %d refused", a, r)
	}
}

// Requests counted from many goroutines at once land on the bucket's stripes,
// and the window's sum counts every one of them: 8 x 1000 requests in one
// second allow 20% of 8000 replays.
func TestRetryBudgetCountsEveryRequestAcrossItsStripes(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newRetryBudget(RetryBudget{Ratio: 0.2, MinPerSecond: 1, Window: 10 * time.Second})
	b.now = func() time.Time { return now }
	if b.stripes == 0 || b.stripes&(b.stripes-1) != 0 || b.stripes > maxStripes {
		t.Fatalf("%d stripes: want a power of two up to %d", b.stripes, maxStripes)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				b.request(now)
			}
		})
	}
	wg.Wait()
	if got := b.current(now.Unix()).requestCount(); got != 8000 {
		t.Fatalf("the bucket counts %d requests, want 8000", got)
	}
	allowed := 0
	for b.allow() {
		allowed++
	}
	if allowed != 1600 {
		t.Fatalf("%d replays allowed for 8000 requests at 20%%", allowed)
	}
}
