package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"
)

// stallServer answers every request after work, except one request in
// every stallEvery, which it holds for stall first: a server with a slow
// tail (a garbage-collection pause, a cold cache, a lock) that a hedged
// request can route around. Which requests stall is fixed by their order of
// arrival, so the share is exact and the same for every client. It counts
// what it saw: with hedging, the server sees more requests than the
// callers sent. Safe for concurrent use.
type stallServer struct {
	work, stall time.Duration
	stallEvery  int64

	seen, stalled atomic.Int64
}

func (s *stallServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.seen.Add(1)
	d := s.work
	if s.stallEvery > 0 && n%s.stallEvery == 0 {
		s.stalled.Add(1)
		d += s.stall
	}
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done(): // a cancelled attempt: the client went away
			t.Stop()
			return
		}
	}
	w.Write([]byte("ok"))
}

// counts returns the requests seen and stalled so far.
func (s *stallServer) counts() (seen, stalled int64) { return s.seen.Load(), s.stalled.Load() }

// sickHandler answers 503 at once on the address sick, and "ok" after work
// on the others: one bad replica behind a service name.
func sickHandler(sick netip.Addr, work time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if ap, err := netip.ParseAddrPort(local.String()); err == nil && ap.Addr() == sick {
				http.Error(w, "sick", http.StatusServiceUnavailable)
				return
			}
		}
		if work > 0 {
			time.Sleep(work)
		}
		w.Write([]byte("ok"))
	})
}

// roundRobin is a dialer for net/http that sends each new connection to
// the next of addrs (at the port the request names), as a client-side load
// balancer over one name's addresses does: net/http itself dials the first
// address a lookup returns and pools by host name. Safe for concurrent use.
type roundRobin struct {
	addrs []netip.Addr
	next  atomic.Uint64
	d     net.Dialer
}

// pick returns the address of the next connection to addr ("host:port").
func (rr *roundRobin) pick(addr string) (string, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	a := rr.addrs[(rr.next.Add(1)-1)%uint64(len(rr.addrs))]
	return net.JoinHostPort(a.String(), port), nil
}

func (rr *roundRobin) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	to, err := rr.pick(addr)
	if err != nil {
		return nil, fmt.Errorf("round robin: %w", err)
	}
	return rr.d.DialContext(ctx, network, to)
}
