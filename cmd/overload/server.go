package main

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// kServer is the upstream under test: it serves k requests at a time, each
// for the current service time, and queues the rest in arrival order (a
// worker pool behind an unbounded queue, as most servers are). It serves
// every request it accepted, even one whose caller has given up: it cannot
// know until it answers, and counts those answers as wasted. Safe for
// concurrent use.
type kServer struct {
	slots   chan struct{}                              // one token per worker: k in all
	service atomic.Int64                               // nanoseconds a request takes, from when a worker takes it
	work    func(ctx context.Context, d time.Duration) // the work itself: a sleep, or a test's gate

	queued   atomic.Int64 // requests waiting for a worker now
	inFlight atomic.Int64 // requests a worker holds now
	served   atomic.Int64 // responses written
	wasted   atomic.Int64 // of them, to callers that had given up
	// skipGone, once set (the run is over), makes workers skip the requests
	// of callers already gone, so that the server empties its queue at once;
	// skipped counts them.
	skipGone atomic.Bool
	skipped  atomic.Int64
	onChange func() // nil, or called after each change of queued or inFlight (tests)
	// reached marks the callers whose request reached the server (by the
	// callHeader each carries; nil = not tracked): a caller the client
	// refused must never be among them.
	reached []atomic.Bool
}

// callHeader carries a caller's index, for kServer.reached.
const callHeader = "X-Overload-Call"

func newKServer(k int, service time.Duration) *kServer {
	s := &kServer{slots: make(chan struct{}, k), work: sleep}
	s.service.Store(int64(service))
	return s
}

// sleep is the default work: the request's service time, whatever its
// caller does meanwhile.
func sleep(_ context.Context, d time.Duration) { time.Sleep(d) }

// setService changes the service time of the requests workers take from now.
func (s *kServer) setService(d time.Duration) { s.service.Store(int64(d)) }

func (s *kServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if i, err := strconv.Atoi(r.Header.Get(callHeader)); err == nil && i >= 0 && i < len(s.reached) {
		s.reached[i].Store(true)
	}
	s.queued.Add(1)
	s.changed()
	s.slots <- struct{}{} // waiting goroutines are woken in arrival order
	s.queued.Add(-1)
	s.inFlight.Add(1)
	s.changed()
	defer func() {
		s.inFlight.Add(-1)
		<-s.slots
		s.changed()
	}()
	if s.skipGone.Load() && r.Context().Err() != nil {
		s.skipped.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	s.work(r.Context(), time.Duration(s.service.Load()))
	if r.Context().Err() != nil {
		s.wasted.Add(1)
	}
	w.Header().Set("Content-Length", "2")
	_, _ = w.Write([]byte("ok"))
	s.served.Add(1)
}

func (s *kServer) changed() {
	if s.onChange != nil {
		s.onChange()
	}
}

// serverCounts is a snapshot of a kServer's counters.
type serverCounts struct {
	queued, inFlight, served, wasted, skipped int64
}

func (s *kServer) counts() serverCounts {
	return serverCounts{s.queued.Load(), s.inFlight.Load(), s.served.Load(), s.wasted.Load(), s.skipped.Load()}
}
