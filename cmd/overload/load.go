package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/internal/testkit/benchkit"
)

// outcome is one caller's request.
type outcome struct {
	arrived time.Duration // offset from the run's start
	took    time.Duration // from arrival to the body's end, or to the error
	class   string        // "" for a success, else the error's class
}

func (o outcome) done() time.Duration { return o.arrived + o.took }

// serverSample is the server's state at offset t of a run.
type serverSample struct {
	t time.Duration
	serverCounts
	// limit is the client's route's, from its Stats (-1: a client without
	// them).
	limit int
}

// run is what one client's run recorded.
type run struct {
	client   string
	sch      schedule
	k        int
	outcomes []outcome
	server   []serverSample // every sampleEvery
	final    serverCounts   // after the last handler returned
	// refusedAtServer counts the callers the client refused (ErrQueueFull,
	// ErrOverloaded) whose request reached the server nonetheless.
	refusedAtServer int
}

// routeStats is a client that reports its routes' Stats (connactor's).
type routeStats interface{ Stats() client.Stats }

// routeLimit reads the limit of rt's one route (-1 for a client without
// Stats, or before its route exists).
func routeLimit(rt http.RoundTripper) int {
	rs, ok := rt.(routeStats)
	if !ok {
		return -1
	}
	routes := rs.Stats().Routes
	if len(routes) == 0 {
		return -1
	}
	return routes[0].Limit
}

const sampleEvery = 50 * time.Millisecond

// runClient runs sch against a new kServer of k workers through the client
// spec makes: callers arrive open-loop at each phase's rate, each with
// deadline to get its whole response. It returns when every caller has its
// answer and the server has finished every request it accepted.
func runClient(spec clientSpec, sch schedule, k int, deadline time.Duration) (*run, error) {
	srv := newKServer(k, sch[0].service)
	// stopServer waits for the answers in flight: the last of them count.
	url, stopServer, err := benchkit.Serve(srv, 30*time.Second)
	if err != nil {
		return nil, err
	}
	rt, closeClient, err := spec.make()
	if err != nil {
		stopServer()
		return nil, err
	}
	r := &run{client: spec.name, sch: sch, k: k}
	arrivals := sch.arrivals()
	r.outcomes = make([]outcome, len(arrivals))
	srv.reached = make([]atomic.Bool, len(arrivals))

	start := time.Now()
	// Every sampleEvery from the start, the server takes the service time
	// of the phase and is sampled with the route's limit.
	sample := func() {
		t := time.Since(start)
		srv.setService(sch[sch.at(t)].service)
		r.server = append(r.server, serverSample{t: t, serverCounts: srv.counts(), limit: routeLimit(rt)})
	}
	sample()
	benchkit.SampleWhile(sampleEvery, sample, func() {
		var callers sync.WaitGroup
		for i, at := range arrivals {
			if d := time.Until(start.Add(at)); d > 0 {
				time.Sleep(d)
			}
			callers.Add(1)
			go func() { // owned by runClient, which waits on callers
				defer callers.Done()
				r.outcomes[i] = call(rt, url, i, start, deadline)
			}()
		}
		callers.Wait()
		srv.skipGone.Store(true)
	})
	closeClient()
	stopServer()
	r.final = srv.counts()
	for i, o := range r.outcomes {
		if refused(o.class) && srv.reached[i].Load() {
			r.refusedAtServer++
		}
	}
	return r, nil
}

// call makes one caller's request, arriving now, and reads its whole
// response within deadline.
func call(rt http.RoundTripper, url string, id int, start time.Time, deadline time.Duration) outcome {
	arrived := time.Now()
	o := outcome{arrived: arrived.Sub(start)}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var mu sync.Mutex // the trace hook may run on another goroutine
	var gotConn bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) {
		mu.Lock()
		gotConn = true
		mu.Unlock()
	}})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set(callHeader, strconv.Itoa(id))
	resp, err := rt.RoundTrip(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
	}
	o.took = time.Since(arrived)
	if err != nil {
		mu.Lock()
		o.class = classify(err, gotConn)
		mu.Unlock()
	}
	return o
}
