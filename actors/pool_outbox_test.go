//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package actors

import (
	"bufio"
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/testkit/faultserver"
	"github.com/connactor/connactor/route"
)

// halfCloser is a loopback server that answers one request per connection,
// without Connection: close, then half-closes it (its FIN reaches the
// client) and goes on reading, to count the bytes the client writes to the
// connection afterwards: a request on a connection the server closed.
type halfCloser struct {
	ln   net.Listener
	wg   sync.WaitGroup
	done chan int // per connection, after the client closed it: the bytes it wrote after the FIN
}

func newHalfCloser(t *testing.T) *halfCloser {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &halfCloser{ln: ln, done: make(chan int, 64)}
	s.wg.Go(func() { // owned by s.wg, waited for in cleanup
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serve(nc.(*net.TCPConn)) }) // owned by s.wg
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *halfCloser) serve(nc *net.TCPConn) {
	defer nc.Close()
	br := bufio.NewReader(nc)
	if skipHead(br) != nil {
		return
	}
	io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	nc.CloseWrite()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _ := io.Copy(io.Discard, br)
	s.done <- int(n)
}

// An offered connection that the server closed is never used for a request,
// because the probe still runs before anything is written: ten GETs to a
// server that half-closes each connection after its response, each sent once
// the FIN is in the client's socket, with the idle watch pushed out so that
// the probe is what finds it. Each GET after the first takes the offer,
// finds it stale, writes nothing to it, and is replayed on a new connection:
// every GET gets its 200, and the server sees no byte after any FIN.
func TestAnOfferedConnectionTheServerClosedIsNeverUsedForARequest(t *testing.T) {
	srv := newHalfCloser(t)
	var last faultserver.LastConn
	p := newTestPool(t, PoolConfig{MaxConnsPerRoute: 1, DialContext: last.Dial})
	p.connOpt.IdleWatchDelay = time.Hour // before the first connection: the probe finds the FIN, not the watch
	url := "http://" + srv.ln.Addr().String() + "/"
	const gets = 10
	for i := 0; i < gets; i++ {
		if got := get(t, p, url); got != "ok" {
			t.Fatalf("GET %d: %q", i, got)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := last.WaitFIN(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	st := snapshot(t, p).Routes[0]
	if st.Offered != gets-1 {
		t.Fatalf("%d leases taken from the outbox, want %d (every GET after the first)", st.Offered, gets-1)
	}
	stale := st.ClosedBy[string(route.ReasonNotReusable)] + st.ClosedBy[string(route.ReasonServerClosed)]
	if st.Closed != gets-1 || stale != gets-1 {
		t.Fatalf("closed %d (%v), want %d stale connections", st.Closed, st.ClosedBy, gets-1)
	}
	p.Close(t.Context())
	for i := 0; i < gets; i++ {
		if n := <-srv.done; n != 0 {
			t.Fatalf("the client wrote %d bytes to a connection after the server's FIN", n)
		}
	}
}
