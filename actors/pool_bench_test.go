package actors

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"
)

// BenchmarkPoolRequest: one GET through the pool as the client makes it
// (admission, lease, exchange, body read to its end and closed), on a
// loopback server in this process that answers every request with 13 bytes
// and allocates nothing per request. callers=1 is one caller; callers=16 and
// callers=64 share 16 connections (with 64, callers queue on the route).
// cpu-ns/op (the process's CPU time per request, server included) and
// ctxsw/op (the process's context switches per request) are what a loaded
// machine disturbs least:
//
//	go test -run '^$' -bench PoolRequest -cpu 1,2 ./actors
func BenchmarkPoolRequest(b *testing.B) {
	srv := startCanned(b)
	for _, callers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			p, err := NewPool(PoolConfig{MaxConnsPerRoute: 16, MaxConnsTotal: 16, MaxConcurrentRequests: 1024,
				DialTimeout: 10 * time.Second, MaxIdleTime: time.Minute, ExpiryInterval: time.Second,
				MaxResponseHeaderBytes: 1 << 20, Logger: quiet, LoggerFactory: quietFactory})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { p.Close(b.Context()) })
			url := "http://" + srv.Addr().String() + "/13"
			if err := benchGet(p, url); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			done := reportUsage(b)
			if callers == 1 {
				for b.Loop() {
					if err := benchGet(p, url); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := benchGet(p, url); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			done()
		})
	}
}

func benchGet(p *Pool, url string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := roundTrip(p, req)
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && n != 13 {
		err = fmt.Errorf("%d bytes", n)
	}
	return err
}

// cannedResponse is a 13-byte response, like cmd/connbench's /13.
const cannedResponse = "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!"

// startCanned starts a loopback HTTP/1.1 server that answers each request
// head with cannedResponse, on keep-alive connections; the benchmark closes it.
func startCanned(b *testing.B) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				serveCanned(c, cannedResponse)
			})
		}
	})
	b.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln
}
