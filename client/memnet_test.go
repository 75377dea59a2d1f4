package client

import (
	"context"
	"errors"
	"net"
	"sync"
)

// memListener is a listener on an in-memory network, for tests that run in a
// testing/synctest bubble: there the clock is fake and moves only while every
// goroutine of the bubble is blocked on something of the bubble, which a real
// socket's read is not. Its connections are net.Pipe ends: dial hands one to
// Accept and returns the other. (A pipe has no socket, so the pool's idle probe
// does not apply to it; the idle watch and the exchange's own errors do.)
type memListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

// memAddr is the address a memListener reports: a loopback port no test
// server listens on, so that a dial that missed the listener fails at once
// rather than reaching anything.
type memAddr struct{}

func (memAddr) Network() string { return "tcp" }
func (memAddr) String() string  { return "127.0.0.1:1" }

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

func (l *memListener) Addr() net.Addr { return memAddr{} }

// dial connects to the listener: it waits until Accept takes the server's end,
// the listener closes, or ctx ends. It has net.Dialer.DialContext's shape.
func (l *memListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	var err error
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		err = errMemClosed
	case <-ctx.Done():
		err = ctx.Err()
	}
	client.Close()
	server.Close()
	return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: memAddr{}, Err: err}
}
