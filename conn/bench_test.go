package conn

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

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
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // the server, owned by wg
				defer wg.Done()
				nc, err := ln.Accept()
				if err != nil {
					return
				}
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
			}()
			opt := &Options{DialTimeout: 5 * time.Second, MaxResponseHeaderBytes: 1 << 20,
				Go: func(fn func()) {
					wg.Add(1)
					go func() { defer wg.Done(); fn() }() // owned by wg
				},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return opt.Logger }))
			host, port, _ := net.SplitHostPort(ln.Addr().String())
			dialed, spawned := make(chan *Dialed, 1), make(chan *actor.PID, 1)
			sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
				switch m := ctx.Message().(type) {
				case *actor.Started:
					spawned <- ctx.Spawn(Props(1, route.Key{Scheme: "http", Host: host, Port: port}, opt, context.Background()))
				case *Dialed:
					dialed <- m
				}
			}))
			pid := <-spawned
			if d := <-dialed; d.Err != nil {
				b.Fatal(d.Err)
			}
			defer func() {
				sys.Root.StopFuture(pid).Wait()
				ln.Close()
				wg.Wait()
				sys.Shutdown()
			}()
			released := make(chan bool, 1)
			m := &ExchangeRequest{ConnID: 1, Done: EnderFunc(func(r bool, _ time.Duration) { released <- r })}
			buf := make([]byte, 64)
			rd := strings.NewReader(tc.body)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				var body io.Reader
				if tc.body != "" {
					rd.Reset(tc.body)
					body = rd
				}
				req, _ := http.NewRequest(tc.method, "http://"+ln.Addr().String()+"/", body)
				m.Req, m.Reused, m.Reply = req, i > 0, &wait.Ticket[ExchangeResponse]{}
				sys.Root.Send(pid, m)
				<-m.Reply.Ready()
				r, _, _ := m.Reply.Result()
				if r.Err != nil {
					b.Fatal(r.Err)
				}
				for {
					if _, err := r.Resp.Body.Read(buf); err != nil {
						break
					}
				}
				r.Resp.Body.Close()
				if !<-released {
					b.Fatal("connection not reusable")
				}
			}
		})
	}
}
