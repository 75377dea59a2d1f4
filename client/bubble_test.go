package client

// Tests in a testing/synctest bubble: there the clock is fake and moves only
// while every goroutine of the bubble is blocked on something of the bubble,
// so a test waits out the pool's timers, a server's deadlines and its own
// sleeps in no real time. A real socket's read is not such a block: those
// tests run their servers on an in-memory network (memListener).

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// inBubble runs f in a testing/synctest bubble. Its last cleanup (after the
// client's Close) sleeps past protoactor's dead-letter throttle, a goroutine
// that waits one tick of a second after a message to a stopped actor: the
// bubble's clock stops once f returns, and the goroutine must end inside it.
func inBubble(t *testing.T, f func(t *testing.T)) {
	synctest.Test(t, func(t *testing.T) {
		t.Cleanup(func() { time.Sleep(2 * time.Second) })
		f(t)
	})
}

// memListener is a listener on an in-memory network. Its connections are
// net.Pipe ends: dial hands one to Accept and returns the other, each with
// an address of its own as a TCP connection has (127.0.0.1:<n>), so that
// servers tell connections apart. (A pipe has no socket, so the pool's idle
// probe does not apply to it; the idle watch and the exchange's own errors
// do.)
type memListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	ports     atomic.Int32
}

// memAddr is the address a memListener listens on: a loopback port no test
// server listens on, so that a dial that missed the listener fails at once
// rather than reaching anything.
var memAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}

var errMemClosed = errors.New("memnet: listener closed")

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for the next dial, or for Close.
func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, errMemClosed
	}
}

// Close makes Accept and dial fail from now on; connections already made stay open.
func (l *memListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr }

// dial connects to the listener: it waits until Accept takes the server's end,
// the listener closes, or ctx ends. It has net.Dialer.DialContext's shape.
func (l *memListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	local := &net.TCPAddr{IP: memAddr.IP, Port: 10000 + int(l.ports.Add(1))}
	var err error
	select {
	case l.conns <- &memConn{Conn: server, local: memAddr, remote: local}:
		return &memConn{Conn: client, local: local, remote: memAddr}, nil
	case <-l.done:
		err = errMemClosed
	case <-ctx.Done():
		err = ctx.Err()
	}
	client.Close()
	server.Close()
	return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: memAddr, Err: err}
}

// memConn is one end of a pipe with the addresses of its connection.
type memConn struct {
	net.Conn
	local, remote net.Addr
}

func (c *memConn) LocalAddr() net.Addr  { return c.local }
func (c *memConn) RemoteAddr() net.Addr { return c.remote }

// newMemHTTPServer starts an httptest server with handler on a memListener,
// for a test in a bubble; the test closes it at its end. Clients reach it
// through the listener's dial (Config.DialContext).
func newMemHTTPServer(t *testing.T, handler http.Handler) (*httptest.Server, *memListener) {
	t.Helper()
	mem := newMemListener()
	srv := httptest.NewUnstartedServer(handler)
	srv.Listener = mem
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, mem
}
