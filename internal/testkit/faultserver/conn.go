package faultserver

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Conn is one accepted connection, as its handler sees it. Its methods are
// called from the handler's goroutine only.
type Conn struct {
	Index int // accept order, from 0

	tcp net.Conn // the TCP socket (under TLS, when the server speaks it)
	nc  net.Conn // what requests are read from and answers written to
	srv *Server

	mu     sync.Mutex
	closed bool
}

// ErrClosed is returned by writes after the connection was closed by its
// handler, and by Sleep and WriteSlowly when the server closes.
var ErrClosed = errors.New("faultserver: connection closed")

// Write writes b as is.
func (c *Conn) Write(b string) error {
	if c.isClosed() {
		return ErrClosed
	}
	_, err := io.WriteString(c.nc, b)
	return err
}

// WriteSlowly writes b one byte at a time, sleeping every between bytes
// (slowloris). It stops early when a write fails or the server closes.
func (c *Conn) WriteSlowly(b string, every time.Duration) error {
	for i := 0; i < len(b); i++ {
		if err := c.Write(b[i : i+1]); err != nil {
			return err
		}
		if err := c.Sleep(every); err != nil {
			return err
		}
	}
	return nil
}

// WriteAndClose writes b and closes the connection so that the end of b and the
// FIN leave together (TCP_CORK on Linux): by the time a client has read the last
// byte, the close has arrived too. It is a server that closes after every
// response without "Connection: close", deterministically.
func (c *Conn) WriteAndClose(b string) error {
	cork(c.tcp, true)
	err := c.Write(b)
	c.Close()
	return err
}

// Close closes the connection gracefully (FIN); the request loop ends.
func (c *Conn) Close() {
	c.closeOnce(func() error { return c.nc.Close() })
}

// CloseWrite half-closes the connection (FIN) and keeps reading possible.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.tcp.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("faultserver: no CloseWrite")
}

// Reset closes the connection abortively: SO_LINGER 0 makes the kernel send a
// RST and drop unsent data, as a crashed or impatient server does.
func (c *Conn) Reset() {
	c.closeOnce(func() error {
		if tc, ok := c.tcp.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		return c.tcp.Close()
	})
}

// Hold reads and discards whatever the client sends until the client closes or
// the server does: a server that accepted and never answers.
func (c *Conn) Hold() {
	io.Copy(io.Discard, c.tcp) // the raw socket: a TLS client's hello is never answered
}

// Sleep waits for d, or returns ErrClosed at once when the server closes.
func (c *Conn) Sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-c.srv.done:
		return ErrClosed
	}
}

// Await waits until ch is closed, or returns ErrClosed at once when the server
// closes: a handler that waits for the test to say "now".
func (c *Conn) Await(ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-c.srv.done:
		return ErrClosed
	}
}

// Reader returns the connection for reading (the raw bytes the client sends),
// for handlers that take over the request loop (Config.Raw).
func (c *Conn) Reader() io.Reader { return c.nc }

func (c *Conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Conn) closeOnce(f func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		f()
	}
}
