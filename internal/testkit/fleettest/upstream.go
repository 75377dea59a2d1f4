package fleettest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Upstream is an HTTP/1.1 server on 127.0.0.1 that counts connections from
// its side: each accept and each close it sees, with the time it saw it. A
// close reaches the server after the client closed, so a count at the server
// can run ahead of the client's for a moment (PeakAllowingLateCloses).
type Upstream struct {
	srv    *http.Server
	ln     net.Listener
	delay  time.Duration
	served atomic.Int64
	done   chan struct{}

	mu     sync.Mutex
	open   map[net.Conn]bool
	events []connEvent
	peak   int
	closed int
}

type connEvent struct {
	at   time.Time
	open bool
}

// UpstreamStats are an Upstream's counts.
type UpstreamStats struct {
	Accepted, Closed int // connections seen opened and closed
	Open, Peak       int // open now, and the most open at once
	Served           int // responses sent
}

// NewUpstream starts an Upstream whose every response takes delay (a request
// whose connection closes stops waiting).
func NewUpstream(delay time.Duration) (*Upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &Upstream{ln: ln, delay: delay, open: map[net.Conn]bool{}, done: make(chan struct{})}
	u.srv = &http.Server{
		Handler:           http.HandlerFunc(u.serve),
		ConnState:         u.connState,
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { // owned by u: Close waits for it through done
		defer close(u.done)
		if err := u.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic("fleettest: upstream: " + err.Error())
		}
	}()
	return u, nil
}

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if u.delay > 0 {
		t := time.NewTimer(u.delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	u.served.Add(1)
	_, _ = io.WriteString(w, "ok\n")
}

func (u *Upstream) connState(c net.Conn, s http.ConnState) {
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	switch s {
	case http.StateNew:
		u.open[c] = true
		u.events = append(u.events, connEvent{at: now, open: true})
		u.peak = max(u.peak, len(u.open))
	case http.StateClosed, http.StateHijacked:
		if u.open[c] {
			delete(u.open, c)
			u.closed++
			u.events = append(u.events, connEvent{at: now})
		}
	}
}

// Addr is the server's host:port.
func (u *Upstream) Addr() string { return u.ln.Addr().String() }

// URL is the server's base URL, which is also the route key connactor gives
// it ("http://127.0.0.1:port").
func (u *Upstream) URL() string { return "http://" + u.Addr() }

// Stats returns the counts so far.
func (u *Upstream) Stats() UpstreamStats {
	u.mu.Lock()
	defer u.mu.Unlock()
	return UpstreamStats{
		Accepted: len(u.open) + u.closed, Closed: u.closed,
		Open: len(u.open), Peak: u.peak, Served: int(u.served.Load()),
	}
}

// PeakAllowingLateCloses is the most connections open at once if every close
// had happened grace earlier than the server saw it: a client that closes
// one connection and then opens another can have the server see the new one
// first. With grace 0 it is Stats().Peak.
func (u *Upstream) PeakAllowingLateCloses(grace time.Duration) int {
	u.mu.Lock()
	events := make([]connEvent, len(u.events))
	copy(events, u.events)
	u.mu.Unlock()
	for i := range events {
		if !events[i].open {
			events[i].at = events[i].at.Add(-grace)
		}
	}
	// Closes first among equal times: they may well have come first.
	sort.SliceStable(events, func(i, j int) bool {
		if events[i].at.Equal(events[j].at) {
			return !events[i].open && events[j].open
		}
		return events[i].at.Before(events[j].at)
	})
	open, peak := 0, 0
	for _, e := range events {
		if e.open {
			open++
			peak = max(peak, open)
		} else {
			open--
		}
	}
	return peak
}

// Close stops the server, closes its connections and waits for it.
func (u *Upstream) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := u.srv.Shutdown(ctx)
	if err != nil {
		err = u.srv.Close()
	}
	<-u.done
	return err
}
