package client

import (
	"testing"

	"github.com/connactor/connactor/actors"
)

func TestACancelledLeaseStopsWaitingWhenItsRouteActorHasStopped(t *testing.T) {
	c := &Client{closedCh: make(chan struct{})}
	h := &actors.RouteHandle{Pub: &actors.RoutePublished{}}
	reply := make(chan actors.LeaseResponse, 1)

	// The route answers: that answer is returned.
	reply <- actors.LeaseResponse{Err: actors.ErrRouteClosed}
	if r, ok := c.awaitCancelled(h, reply); !ok || r.Err != actors.ErrRouteClosed {
		t.Fatalf("answered cancel: %+v, %v", r, ok)
	}

	// The route stopped (after a panic protoactor drops the requests still in
	// its mailbox): no answer will come, and the wait ends.
	done := make(chan bool, 1)
	go func() { _, ok := c.awaitCancelled(h, reply); done <- ok }()
	h.Pub.Stopped.Store(true)
	if ok := <-done; ok {
		t.Fatal("reported an answer that never came")
	}

	// The client closed: the wait ends too.
	h2 := &actors.RouteHandle{Pub: &actors.RoutePublished{}}
	close(c.closedCh)
	if _, ok := c.awaitCancelled(h2, make(chan actors.LeaseResponse, 1)); ok {
		t.Fatal("reported an answer after Close")
	}
}
