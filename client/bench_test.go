package client

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"testing"
)

// Micro-benchmarks of one full request through connactor and through net/http's
// Transport, on the same in-process loopback server, in the same run:
//
//	go test -run '^$' -bench 'Request|Stats' -benchmem ./client
//
// The server answers every request with one canned response and allocates
// nothing per request, so allocs/op are the client's. It shares the CPU with
// the client, so ns/op are not client CPU: cmd/connbench measures that with the
// server in its own process.

// cannedResponse is a 13-byte response, like cmd/connbench's /13.
const cannedResponse = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!"

// cannedServer is a loopback HTTP/1.1 server with n listeners that answers each
// request head (GET, no body) with cannedResponse, on keep-alive connections.
type cannedServer struct {
	lns   []net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func startCanned(tb testing.TB, n int) *cannedServer {
	tb.Helper()
	s := &cannedServer{conns: map[net.Conn]struct{}{}}
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		s.lns = append(s.lns, ln)
		s.wg.Go(func() { s.accept(ln) })
	}
	tb.Cleanup(s.close)
	return s
}

func (s *cannedServer) url(i int) string { return "http://" + s.lns[i].Addr().String() + "/13" }

func (s *cannedServer) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() { s.serve(c) })
	}
}

func (s *cannedServer) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	resp := []byte(cannedResponse)
	for {
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 { // "\r\n": end of the request head
				break
			}
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

func (s *cannedServer) close() {
	for _, ln := range s.lns {
		ln.Close()
	}
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// BenchmarkRequestConnactor: GET, body read to EOF and closed, through
// connactor's RoundTrip (16 connections), one caller and 64 callers.
func BenchmarkRequestConnactor(b *testing.B) {
	srv := startCanned(b, 1)
	c := newClient(b, Config{MaxConnsPerRoute: 16, MaxConnsTotal: 16, Logger: testLogger()})
	benchRequests(b, c, srv.url(0))
}

// BenchmarkRequestNetHTTP: the same through net/http's Transport with the same
// limit (MaxConnsPerHost 16).
func BenchmarkRequestNetHTTP(b *testing.B) {
	srv := startCanned(b, 1)
	tr := &http.Transport{MaxConnsPerHost: 16, MaxIdleConnsPerHost: 16, DisableCompression: true}
	b.Cleanup(tr.CloseIdleConnections)
	benchRequests(b, tr, srv.url(0))
}

func benchRequests(b *testing.B, rt http.RoundTripper, url string) {
	b.Run("serial", func(b *testing.B) {
		req, buf := newBenchRequest(b, url), make([]byte, 512)
		b.ReportAllocs()
		for b.Loop() {
			if err := benchGet(rt, req, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel64", func(b *testing.B) {
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			req, buf := newBenchRequest(b, url), make([]byte, 512)
			for pb.Next() {
				if err := benchGet(rt, req, buf); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// newBenchRequest builds the request a caller re-uses: request building is not
// what is measured.
func newBenchRequest(b *testing.B, url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	return req
}

func benchGet(rt http.RoundTripper, req *http.Request, buf []byte) error {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	n := 0
	for {
		m, rerr := resp.Body.Read(buf)
		n += m
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			resp.Body.Close()
			return rerr
		}
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || n != 13 {
		return fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
	}
	return nil
}

// BenchmarkStats: one Stats() call with 1 and 100 routes, each holding one
// idle connection (two message round trips, and one route reply per route).
func BenchmarkStats(b *testing.B) {
	for _, routes := range []int{1, 100} {
		b.Run(fmt.Sprintf("routes=%d", routes), func(b *testing.B) {
			srv := startCanned(b, routes)
			c := newClient(b, Config{MaxConnsPerRoute: 1, MaxConnsTotal: routes, Logger: testLogger()})
			buf := make([]byte, 512)
			for i := 0; i < routes; i++ {
				if err := benchGet(c, newBenchRequest(b, srv.url(i)), buf); err != nil {
					b.Fatal(err)
				}
			}
			waitIdle(b, c, routes)
			b.ReportAllocs()
			for b.Loop() {
				if st := c.Stats(); len(st.Routes) != routes {
					b.Fatalf("Stats has %d routes, want %d", len(st.Routes), routes)
				}
			}
		})
	}
}
