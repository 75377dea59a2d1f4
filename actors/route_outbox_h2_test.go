package actors

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/connactor/connactor/conn/h2"
	"github.com/connactor/connactor/internal/testkit/h2server"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

// h2Route starts route "a" of p, whose server (withH2C) takes streams
// streams a connection, with one connection that has served a stream and
// knows the server's SETTINGS: its free streams are on offer.
func (p *pool) h2Route(streams int) *routeHandle {
	p.tb.Helper()
	h, _ := p.h2RouteOf(streams)
	return h
}

// h2RouteOf is h2Route, and also returns the first lease of the
// connection, released since (its ConnID names the connection).
func (p *pool) h2RouteOf(streams int) (*routeHandle, Lease) {
	p.tb.Helper()
	h := p.route("a")
	first := p.leased(p.ask(h))
	if first.H2 == nil {
		p.tb.Fatal("the lease is no HTTP/2 stream")
	}
	eventually(p.tb, "the server's SETTINGS known", func() bool { return first.H2.Streams().Settings })
	p.release(h, true, first)
	p.offers(h, min(streams, cap(h.outbox)))
	return h, first
}

// An HTTP/2 connection with free streams offers them, one slot an offer: a
// caller that takes one holds a stream lease as a granted one (the
// connection's engine, Reused), and sends its request on it. The route
// counts each slot in use from the moment it is offered: once all are taken
// (none heard of), a LeaseRequest makes it take the outbox back, count the
// taken slots as leased streams, and serve the caller from the slot that came
// back. Stats count each lease once, offers in Offered, and the connection
// as idle only while all its slots wait in the outbox.
func TestAnHTTP2ConnectionOffersItsFreeStreamsAsStreamLeases(t *testing.T) {
	s, opt := withH2C(t, 4)
	s.openGate()
	p := newPool(t, 16, 16, opt)
	h := p.h2Route(4)
	before := p.stats(h)
	if before.Idle != 1 || before.Leased != 0 || before.Open != 1 {
		t.Fatalf("with every slot in the outbox: %+v", before)
	}
	var ls []Lease
	for i := 0; i < 4; i++ {
		l, ok := p.take(h)
		if !ok || l.H2 == nil || !l.Offered || !l.Reused || (i > 0 && l.ConnID != ls[0].ConnID) {
			t.Fatalf("offer %d: %+v, %v", i, l, ok)
		}
		ls = append(ls, l)
	}
	if _, ok := p.take(h); ok {
		t.Fatal("a fifth slot offered on a connection that takes four streams")
	}
	resp, err := ls[0].H2.RoundTrip(newGet(t, "http://a/"), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the stream got %d", resp.StatusCode)
	}
	p.release(h, true, ls[0]) // heard of: a lease counted; its slot is offered again
	p.offers(h, 1)
	if st := p.stats(h); st.Idle != 0 || st.Leased != 1 || st.Leases != before.Leases+1 || st.Offered != before.Offered+1 {
		t.Fatalf("with three slots taken and one released: %+v (offered %d)", st, st.Offered)
	}
	w := p.leased(p.ask(h))
	if w.ConnID != ls[0].ConnID || w.Offered || w.QueuePos != 0 {
		t.Fatalf("the request got %+v, want the slot that came back, at once", w)
	}
	st := p.stats(h)
	if st.Leases != before.Leases+5 || st.Offered != before.Offered+4 || st.Streams != 4 || st.Pending != 0 ||
		st.Leased != 1 || st.Idle != 0 || len(h.outbox) != 0 {
		t.Fatalf("with the taken slots counted and the request served: %+v (offered %d, streams %d, outbox %d)",
			st, st.Offered, st.Streams, len(h.outbox))
	}
	p.release(h, true, append(ls[1:], w)...)
	p.offers(h, 4)
	st = p.stats(h)
	if st.Leases != before.Leases+5 || st.Offered != before.Offered+4 || st.Streams != 0 || st.Idle != 1 || st.Leased != 0 {
		t.Fatalf("after the releases: %+v (offered %d, streams %d)", st, st.Offered, st.Streams)
	}
}

// A route that may speak HTTP/2 offers up to offerDepth stream slots also
// when it may hold a single connection: the slots are streams of that one.
func TestAnHTTP2RouteOfOneConnectionOffersSeveralStreams(t *testing.T) {
	s, opt := withH2C(t, 8)
	s.openGate()
	p := newPool(t, 1, 16, opt)
	h := p.h2Route(8)
	if cap(h.outbox) != offerDepth || len(h.outbox) != offerDepth {
		t.Fatalf("outbox of %d with %d slots on offer; want %d of %d", cap(h.outbox), len(h.outbox), offerDepth, offerDepth)
	}
	var ls []Lease
	for range offerDepth {
		l, ok := p.take(h)
		if !ok || l.H2 == nil {
			t.Fatalf("slot %d: %+v, %v", len(ls), l, ok)
		}
		ls = append(ls, l)
	}
	p.release(h, true, ls...)
	p.offers(h, offerDepth)
	if st := p.stats(h); st.Open != 1 || st.Leased != 0 || st.Streams != 0 {
		t.Fatalf("after the releases: %+v (streams %d)", st, st.Streams)
	}
}

// The FIFO with stream offers: a caller that queued is never overtaken by
// one that takes an offer after it queued. A connection of two streams, both
// on offer and taken; W queues (the route's second dial is held); the
// outbox stays empty while W waits; a released stream goes to W, the next
// to X, who queued behind it.
func TestAStreamOfferNeverOvertakesAQueuedCaller(t *testing.T) {
	_, opt := withH2C(t, 2) // the gate stays shut: the route's second dial never ends
	p := newPool(t, 2, 8, opt)
	h := p.h2Route(2)
	a, ok1 := p.take(h)
	b, ok2 := p.take(h)
	if !ok1 || !ok2 {
		t.Fatal("two slots not on offer")
	}
	w := p.ask(h)
	if !p.waiting(h, w) {
		t.Fatal("W was served with both streams taken")
	}
	if _, ok := p.take(h); ok {
		t.Fatal("an offer while a caller waits")
	}
	x := p.ask(h)
	p.release(h, true, a)
	if l := p.leased(w); l.ConnID != a.ConnID || l.Offered || l.QueuePos != 1 {
		t.Fatalf("W got %+v, want the released stream from the FIFO", l)
	} else {
		defer p.release(h, true, l)
	}
	if !p.waiting(h, x) {
		t.Fatal("X served before a stream was released")
	}
	if _, ok := p.take(h); ok {
		t.Fatal("an offer while X waits")
	}
	p.release(h, true, b)
	if l := p.leased(x); l.QueuePos != 2 {
		t.Fatalf("X got %+v", l)
	} else {
		p.release(h, true, l)
	}
}

// The hammer with stream offers: 12 callers on a route of up to 4
// connections of 3 streams each, half taking offers, half asking the route
// (offerHammer): the FIFO bound holds, no connection carries more streams
// than its limit, and the route's limits hold.
func TestStreamOffersKeepTheFIFOBoundAndTheLimitsUnderAHammer(t *testing.T) {
	const conns, streams = 4, 3
	s, opt := withH2C(t, streams)
	s.openGate()
	hm := &offerHammer{}
	p := newPool(t, conns, conns, opt, withFault(hm.hook))
	h := p.h2Route(streams)
	hm.run(t, p, h, 12, 300, streams)
	st := p.stats(h)
	s.mu.Lock()
	dials := s.dials
	s.mu.Unlock()
	if st.Open > conns || dials > conns || p.supStats().Total > conns {
		t.Fatalf("limits exceeded: open %d, dials %d, total %d", st.Open, dials, p.supStats().Total)
	}
}

// An idle HTTP/2 connection on offer is closed only after its slots are
// taken back, and a slot that was taken before is never closed under its
// holder: CloseIdle finds it leased and closes nothing; once released,
// CloseIdle takes its slots back and closes it, and nothing is on offer
// after.
func TestAnIdleHTTP2ConnectionOnOfferClosesOnlyWithItsSlotsTakenBack(t *testing.T) {
	s, opt := withH2C(t, 4)
	s.openGate()
	p := newPool(t, 16, 16, opt)
	h := p.h2Route(4)
	o := <-h.outbox // a caller took a slot, and has not used it yet
	closeIdle := func() int {
		tk := &wait.Ticket[int]{}
		p.sys.Root.Send(h.PID, &CloseIdleRequest{Ticket: tk})
		n, err := result(t, tk)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := closeIdle(); n != 0 {
		t.Fatalf("CloseIdle closed %d connections, one of whose slots a caller holds", n)
	}
	if st := p.stats(h); st.Open != 1 || st.Leased != 1 || st.Streams != 1 || len(h.outbox) != 3 {
		t.Fatalf("after CloseIdle: %+v (streams %d, outbox %d: the three free slots offered again)", st, st.Streams, len(h.outbox))
	}
	l := o.conn.lease(true, 0)
	l.Offered = true
	if st := o.conn.h2.Streams(); st.Closed || st.Draining {
		t.Fatalf("the held slot's connection: %+v", st)
	}
	p.release(h, true, l)
	p.offers(h, 4)
	if n := closeIdle(); n != 1 {
		t.Fatalf("CloseIdle closed %d connections, want the idle one on offer", n)
	}
	if _, ok := p.take(h); ok || len(h.outbox) != 0 {
		t.Fatal("a slot of a closed connection on offer")
	}
	if st := p.stats(h); st.Open != 0 || st.ClosedBy[string(route.ReasonCloseIdle)] != 1 {
		t.Fatalf("after the close: %+v", st)
	}
}

// Slots of an idle HTTP/2 connection taken past its due time are declined:
// the route closes it as due once the last comes back, counts no lease, and
// the caller leases another way.
func TestStreamOffersTakenPastTheirDueTimeAreDeclined(t *testing.T) {
	s, opt := withH2C(t, 4)
	s.openGate()
	p := newPool(t, 16, 16, opt) // MaxIdleTime: a minute
	h := p.h2Route(4)
	before := p.stats(h)
	if _, ok := h.take(time.Now().Add(2 * time.Minute)); ok {
		t.Fatal("a slot past its connection's due time was taken")
	}
	p.offers(h, 0)
	st := p.stats(h)
	if st.Open != 0 || st.ClosedBy[string(route.ReasonIdleExpired)] != 1 || st.Leases != before.Leases || st.Offered != before.Offered {
		t.Fatalf("after the declines: %+v", st)
	}
}

// scriptedH2 starts a scripted HTTP/2 server whose connections take four
// streams, answer every request, and are handed to the test (conns), and a
// Pool that trusts it.
func scriptedH2(t *testing.T) (*h2server.Server, chan *h2server.Conn, *Pool) {
	conns := make(chan *h2server.Conn, 8)
	s, err := h2server.Start(h2server.Config{Conn: func(int) h2server.Script {
		return h2server.Script{Settings: []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 4}},
			Run: func(c *h2server.Conn) {
				conns <- c
				h2server.Serve(c, func(c *h2server.Conn, r *h2server.Request) { c.OK(r) })
			}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p := newTestPool(t, PoolConfig{TLSConfig: &tls.Config{RootCAs: s.Cert.Pool}})
	return s, conns, p
}

// A connection that stops taking streams has its offers taken back, and a
// slot a caller took before sends nothing: on a GOAWAY, or on SETTINGS that
// lower MAX_CONCURRENT_STREAMS to 0, the outbox empties, the held slot's
// request fails as not sent (the connection's own count refuses it), and the
// next request goes out on a new connection. The server never sees the held
// slot's request, and the route counts its lease once.
func TestAConnectionThatStopsTakingStreamsHasItsOffersTakenBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(c *h2server.Conn) bool
	}{
		{"GOAWAY", func(c *h2server.Conn) bool { return c.GoAway(1, http2.ErrCodeNo, "") == nil }},
		{"max streams 0", func(c *h2server.Conn) bool {
			return c.Settings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 0})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, conns, p := scriptedH2(t)
			if got := get(t, p, s.URL()+"/?id=first"); got == "" {
				t.Fatal("no body")
			}
			c := <-conns
			h := p.cachedRoute(t)
			eventually(t, "four slots on offer", func() bool { return len(h.outbox) == 4 })
			held, ok := h.take(time.Now())
			if !ok || held.H2 == nil {
				t.Fatalf("took %+v, %v", held, ok)
			}
			if !tc.stop(c) {
				t.Fatal("the server's connection ended")
			}
			eventually(t, "the offers taken back", func() bool { return len(h.outbox) == 0 })
			_, err := held.H2.RoundTrip(newGet(t, s.URL()+"/?id=held"), nil)
			if !errors.Is(err, h2.ErrNoStream) {
				t.Fatalf("the held slot's request: %v, want it refused unsent (h2.ErrNoStream)", err)
			}
			h.post(&Released{ConnID: held.ConnID, Reusable: true, Offered: true})
			if got := get(t, p, s.URL()+"/?id=after"); got == "" {
				t.Fatal("no body")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := s.WaitSeen(ctx, "after"); err != nil {
				t.Fatal(err)
			}
			for _, seen := range s.Seen() {
				if seen.ID == "held" {
					t.Fatalf("the server saw the held slot's request: %+v", seen)
				}
			}
			if cs := s.ConnsOf("after"); len(cs) != 1 || cs[0] != 1 {
				t.Fatalf("the next request went on connections %v, want the second", cs)
			}
			st := snapshot(t, p).Routes[0]
			if st.Offered != 1 || st.Leases != 3 || st.Pending != 0 {
				t.Fatalf("leases %d (offered %d), pending %d; want 3 (1), 0", st.Leases, st.Offered, st.Pending)
			}
		})
	}
}

// BenchmarkStreamLeaseRelease: stream leases on one HTTP/2 connection (a
// limit of 250 streams) and their releases, without the streams themselves:
// what the route costs a stream. outbox=false asks the route for every
// lease (LeaseRequest); outbox=true takes a slot from the outbox first, as
// the pool's leases do (offered/lease: the share of leases that took one).
func BenchmarkStreamLeaseRelease(b *testing.B) {
	for _, callers := range []int{1, 16, 64} {
		for _, outbox := range []bool{false, true} {
			b.Run(fmt.Sprintf("callers=%d/outbox=%v", callers, outbox), func(b *testing.B) {
				s, opt := withH2C(b, 250)
				s.openGate()
				p := newPool(b, 16, 16, opt)
				h := p.h2Route(250)
				leaseReleaseFrom(b, p, h, callers, outbox)
			})
		}
	}
}

// A request that takes a stream slot from the outbox is a request like any
// other: the second GET on an HTTP/2 connection takes an offer (no message
// to the route), runs on the same connection, and its httptrace says the
// connection was reused; the route counts both leases, one of them offered.
func TestARequestOnAnOfferedStreamIsARequestLikeAnyOther(t *testing.T) {
	s, _, p := scriptedH2(t)
	get(t, p, s.URL()+"/?id=first")
	h := p.cachedRoute(t)
	eventually(t, "four slots on offer", func() bool { return len(h.outbox) == 4 })
	var info httptrace.GotConnInfo
	req := newGet(t, s.URL()+"/?id=second")
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { info = i }}))
	resp, err := roundTrip(p, req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.ProtoMajor != 2 || resp.TLS == nil || !info.Reused || info.Conn == nil {
		t.Fatalf("the offered stream's response: %s %q (%v), TLS %v; GotConn %+v", resp.Proto, body, err, resp.TLS != nil, info)
	}
	if cs := s.ConnsOf("second"); len(cs) != 1 || cs[0] != 0 {
		t.Fatalf("the second request went on connections %v, want the first", cs)
	}
	st := snapshot(t, p).Routes[0]
	if st.Leases != 2 || st.Offered != 1 || st.Reuses != 1 || st.Open != 1 {
		t.Fatalf("leases %d (offered %d, reuses %d), open %d; want 2 (1, 1), 1", st.Leases, st.Offered, st.Reuses, st.Open)
	}
}

// leaseReleaseFrom runs the benchmark's leases and releases on h from
// callers callers (leaseReleaseVia), reporting CPU and context switches per
// op (reportUsage) and the share of leases taken from the outbox.
func leaseReleaseFrom(b *testing.B, p *pool, h *routeHandle, callers int, outbox bool) {
	b.ReportAllocs()
	done := reportUsage(b)
	if callers == 1 {
		for b.Loop() {
			leaseReleaseVia(b, p, h, outbox)
		}
	} else {
		b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				leaseReleaseVia(b, p, h, outbox)
			}
		})
	}
	done()
	st := p.stats(h)
	b.ReportMetric(float64(st.Offered)/float64(max(st.Leases, 1)), "offered/lease")
}
