package conn

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

// benchConns is a loopback server that answers every request on every
// connection with a canned 13-byte response, and n connection actors dialed
// to it, children of an actor that plays their route.
type benchConns struct {
	addr string
	sys  *actor.ActorSystem
	pids []*actor.PID
}

func newBenchConns(b *testing.B, n int) *benchConns {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { // the server, owned by wg; each connection's reader too
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!")
				}
			})
		}
	})
	opt := &Options{DialTimeout: 5 * time.Second, MaxResponseHeaderBytes: 1 << 20,
		Go:     func(fn func()) { wg.Go(fn) }, // owned by wg
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return opt.Logger }))
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	dialed, spawned := make(chan *Dialed, n), make(chan *actor.PID, n)
	sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			for i := range n {
				spawned <- ctx.Spawn(Props(uint64(i+1), route.Key{Scheme: "http", Host: host, Port: port}, opt, context.Background()))
			}
		case *Dialed:
			dialed <- m
		}
	}))
	bc := &benchConns{addr: ln.Addr().String(), sys: sys}
	for range n {
		bc.pids = append(bc.pids, <-spawned)
		if d := <-dialed; d.Err != nil {
			b.Fatal(d.Err)
		}
	}
	b.Cleanup(func() {
		for _, pid := range bc.pids {
			sys.Root.StopFuture(pid).Wait()
		}
		ln.Close()
		wg.Wait()
		sys.Shutdown()
	})
	return bc
}

// exchange runs one exchange of a GET (or of method with body) on the
// connection pid (ID id) and reads the response to its end; it reports
// whether the connection is reusable.
func (bc *benchConns) exchange(b *testing.B, pid *actor.PID, id uint64, m *ExchangeRequest, released chan bool,
	method string, body io.Reader, reused bool) {
	req, _ := http.NewRequest(method, "http://"+bc.addr+"/", body)
	m.ConnID, m.Req, m.Reused, m.Reply = id, req, reused, &wait.Ticket[ExchangeResponse]{}
	bc.sys.Root.Send(pid, m)
	<-m.Reply.Ready()
	r, _, _ := m.Reply.Result()
	if r.Err != nil {
		b.Fatal(r.Err)
	}
	var buf [64]byte
	for {
		if _, err := r.Resp.Body.Read(buf[:]); err != nil {
			break
		}
	}
	r.Resp.Body.Close()
	if !<-released {
		b.Fatal("connection not reusable")
	}
}

// BenchmarkExchange measures one exchange on a pooled connection, through the
// connection actor's message API, against a loopback server that answers every
// request with a canned 13-byte response: a GET (written inline) and a POST
// with a small in-memory body (written by the request writer's goroutine).
// The server shares the CPU, so ns/op is not the client's alone.
func BenchmarkExchange(b *testing.B) {
	for _, tc := range []struct {
		name, method, body string
	}{
		{"get", "GET", ""},
		{"post-small", "POST", strings.Repeat("x", 64)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			bc := newBenchConns(b, 1)
			released := make(chan bool, 1)
			m := &ExchangeRequest{Done: EnderFunc(func(r bool, _ time.Duration) { released <- r })}
			rd := strings.NewReader(tc.body)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				var body io.Reader
				if tc.body != "" {
					rd.Reset(tc.body)
					body = rd
				}
				bc.exchange(b, bc.pids[0], 1, m, released, tc.method, body, i > 0)
			}
		})
	}
}

// BenchmarkLeaseReleaseCycle is the life of a pooled connection under load as
// its route leads it: leased (an exchange), released, told it is idle
// (WatchIdle), leased again by the next caller. conns=16 is 16 connections
// kept busy by 16 callers, each taking whichever is idle. goroutines/op counts
// the goroutines the process started per cycle: the server's and dials'
// are started before the timer, so what remains is the idle watch's timer
// firings and watchers, and the request writers (none for a GET).
func BenchmarkLeaseReleaseCycle(b *testing.B) {
	for _, conns := range []int{1, 16} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			bc := newBenchConns(b, conns)
			type leased struct {
				pid      *actor.PID
				id       uint64
				m        *ExchangeRequest
				released chan bool
				reused   bool
			}
			idle := make(chan *leased, conns)
			for i, pid := range bc.pids {
				l := &leased{pid: pid, id: uint64(i + 1), released: make(chan bool, 1)}
				l.m = &ExchangeRequest{Done: EnderFunc(func(r bool, _ time.Duration) { l.released <- r })}
				idle <- l
			}
			wentIdle := &WatchIdle{} // one message for every release, as the route sends it
			created := goroutinesCreated()
			b.ReportAllocs()
			b.SetParallelism(max(1, conns/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l := <-idle // the lease
					bc.exchange(b, l.pid, l.id, l.m, l.released, http.MethodGet, nil, l.reused)
					l.reused = true
					bc.sys.Root.Send(l.pid, wentIdle) // the release: the route tells it it is idle
					idle <- l
				}
			})
			b.ReportMetric(float64(goroutinesCreated()-created)/float64(b.N), "goroutines/op")
		})
	}
}

// goroutinesCreated is the number of goroutines the process has started.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkIdleWatchCycle is the idle watch's own cost per lease/release
// cycle of a busy connection: armed as it goes idle (onWatchIdle), disarmed
// as it is leased again (stopWatch), with the timer set from an earlier idle
// period, as under load.
func BenchmarkIdleWatchCycle(b *testing.B) {
	client, server := net.Pipe()
	defer server.Close()
	c := &Actor{nc: client, opt: &Options{}, br: newReader(client), bw: newWriter(client)}
	defer c.dropSocket()
	b.ReportAllocs()
	for b.Loop() {
		c.onWatchIdle()
		if err := c.stopWatch(); err != nil {
			b.Fatal(err)
		}
	}
}
