package actors

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http/httptrace"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/connactor/connactor/internal/testkit/h2server"
)

// h2Route starts route "a" of p, whose server (withH2C) takes streams
// streams a connection, with one connection that has served a stream and
// knows the server's SETTINGS.
func (p *pool) h2Route() *routeHandle {
	p.tb.Helper()
	h := p.route("a")
	first := p.leased(p.ask(h))
	if first.H2 == nil {
		p.tb.Fatal("the lease is no HTTP/2 stream")
	}
	eventually(p.tb, "the server's SETTINGS known", func() bool { return first.H2.Streams().Settings })
	p.release(h, true, first)
	p.stats(h) // the release handled
	return h
}

// callerLease leases a connection of h as a pool's call does: an offer from
// the outbox if there is one, a LeaseRequest otherwise.
func (p *pool) callerLease(h *routeHandle) Lease {
	p.tb.Helper()
	if l, ok := h.take(time.Now()); ok {
		return l
	}
	return p.leased(p.ask(h))
}

// Stats are exact at every read while callers hold leases, however they got
// them: HTTP/1.1 connections taken from the outbox count as leased (and
// those still in it as idle), and HTTP/2 streams as streams of a leased
// connection, before the route hears of any of them.
func TestStatsAreExactWhileCallersHoldLeasesTheyTookWithoutAMessage(t *testing.T) {
	t.Run("HTTP/1.1", func(t *testing.T) {
		p := newPool(t, 4, 8)
		h := p.idleRoute("a", 4)
		p.offers(h, 4)
		var held []Lease
		for range 3 {
			held = append(held, p.callerLease(h))
		}
		if st := p.stats(h); st.Open != 4 || st.Leased != 3 || st.Idle != 1 || st.Streams != 0 {
			t.Fatalf("with 3 connections held: open %d, leased %d, idle %d, streams %d; want 4, 3, 1, 0",
				st.Open, st.Leased, st.Idle, st.Streams)
		}
		p.release(h, true, held...)
		if st := p.stats(h); st.Leased != 0 || st.Idle != 4 {
			t.Fatalf("after the releases: leased %d, idle %d; want 0, 4", st.Leased, st.Idle)
		}
	})
	t.Run("HTTP/2", func(t *testing.T) {
		s, opt := withH2C(t, 100)
		s.openGate()
		p := newPool(t, 4, 8, opt)
		h := p.h2Route()
		var held []Lease
		for range 8 {
			held = append(held, p.callerLease(h))
		}
		if st := p.stats(h); st.Open != 1 || st.Leased != 1 || st.Idle != 0 || st.Streams != 8 {
			t.Fatalf("with 8 streams held: open %d, leased %d, idle %d, streams %d; want 1, 1, 0, 8",
				st.Open, st.Leased, st.Idle, st.Streams)
		}
		p.release(h, true, held...)
		if st := p.stats(h); st.Leased != 0 || st.Idle != 1 || st.Streams != 0 {
			t.Fatalf("after the releases: leased %d, idle %d, streams %d; want 0, 1, 0", st.Leased, st.Idle, st.Streams)
		}
	})
}

// A second request on an HTTP/2 route is a stream of the connection the
// first one opened: its httptrace says the connection was reused, and the
// route counts two leases, one of them a reuse.
func TestASecondRequestOnAnHTTP2RouteIsAStreamOfTheFirstOnesConnection(t *testing.T) {
	s, _, p := scriptedH2(t)
	get(t, p, s.URL()+"/?id=first")
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
		t.Fatalf("the second response: %s %q (%v), TLS %v; GotConn %+v", resp.Proto, body, err, resp.TLS != nil, info)
	}
	if cs := s.ConnsOf("second"); len(cs) != 1 || cs[0] != 0 {
		t.Fatalf("the second request went on connections %v, want the first", cs)
	}
	st := snapshot(t, p).Routes[0]
	if st.Leases != 2 || st.Offered != 0 || st.Reuses != 1 || st.Open != 1 {
		t.Fatalf("leases %d (offered %d, reuses %d), open %d; want 2 (0, 1), 1", st.Leases, st.Offered, st.Reuses, st.Open)
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

// BenchmarkStreamLeaseRelease: stream leases on one HTTP/2 connection (a
// limit of 250 streams) and their releases, without the streams themselves:
// what the route costs a stream. Every lease is a LeaseRequest, as the
// pool's are on an HTTP/2 route (streams are never on offer).
func BenchmarkStreamLeaseRelease(b *testing.B) {
	for _, callers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			s, opt := withH2C(b, 250)
			s.openGate()
			p := newPool(b, 16, 16, opt)
			h := p.h2Route()
			leaseReleaseFrom(b, p, h, callers, true)
		})
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
