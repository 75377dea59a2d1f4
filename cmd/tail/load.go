package main

import (
	"context"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// result is what a closed-loop run measured.
type result struct {
	latencies []time.Duration // of the requests that got a response, sorted
	requests  int             // sent
	errors    int             // transport errors
	status    map[int]int     // responses by status code
	h2        int             // responses that came over HTTP/2
}

// closedLoop runs callers goroutines, each sending its next request as soon
// as the previous one's body is read, for d; each request is a GET of url
// through rt. Its latency runs from the send to the end of the body.
func closedLoop(ctx context.Context, rt http.RoundTripper, url string, callers int, d time.Duration) result {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	parts := make([]result, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { // owned by wg: ends when ctx does
			r := &parts[i]
			r.status = map[int]int{}
			for ctx.Err() == nil {
				// The last requests run to their end after d: their
				// latency counts, and requestTimeout bounds them.
				status, h2, took, err := get(rt, url)
				r.requests++
				if err != nil {
					r.errors++
					continue
				}
				r.latencies = append(r.latencies, took)
				r.status[status]++
				if h2 {
					r.h2++
				}
			}
		})
	}
	wg.Wait()
	var all result
	all.status = map[int]int{}
	for _, p := range parts {
		all.latencies = append(all.latencies, p.latencies...)
		all.requests += p.requests
		all.errors += p.errors
		all.h2 += p.h2
		for k, v := range p.status {
			all.status[k] += v
		}
	}
	slices.Sort(all.latencies)
	return all
}

// requestTimeout bounds each request of a run.
const requestTimeout = 10 * time.Second

// get sends one GET of url through rt and reads its body to the end.
func get(rt http.RoundTripper, url string) (status int, h2 bool, took time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, false, 0, err
	}
	start := time.Now()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, false, 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, false, 0, err
	}
	return resp.StatusCode, resp.ProtoMajor == 2, time.Since(start), nil
}

// failed is the requests that got an error or a status other than 200.
func (r result) failed() int { return r.requests - r.status[http.StatusOK] }
