package conn

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
)

// upgradedConn is the Body of a 101 Switching Protocols response (RFC 9110
// section 15.2.2): an io.ReadWriteCloser over the connection, as net/http's,
// so that WebSocket and h2c clients take it over. Reads get the bytes already
// buffered past the 101 head first, then the socket's; writes go to the socket.
// The connection has left HTTP: it is never re-used, the request's context no
// longer bounds it (the caller owns it, as with net/http), and the pool counts
// it as leased until Close, which calls the exchange's Done(false, 0).
//
// Read and Write may run concurrently with each other (one reader, one
// writer); Close may run concurrently with both and is idempotent.
type upgradedConn struct {
	nc   net.Conn
	br   *bufio.Reader // the bytes buffered past the head; nil once read
	done Ender

	// A request body still being written when the 101 came: the new
	// protocol's first write waits for it (RFC 9113 section 3.2 wants the
	// body sent in its entirety first).
	wr        *reqWriter
	writeOnce sync.Once
	writeErr  error

	closeOnce sync.Once
}

// upgrade hands the connection to a 101 response's Body. The exchange is over
// as far as HTTP goes: the context watch is released and the connection marked
// broken, so that no request is ever written to it again.
func (c *Actor) upgrade(resp *http.Response, dl *exchangeDeadlines, w *reqWriter, done Ender) *http.Response {
	c.broken = true
	dl.release() // a context that ended just now left a past deadline: the body's I/O fails, as it should
	u := &upgradedConn{nc: c.nc, done: done}
	if c.br.Buffered() > 0 {
		c.lent.Add(1) // the upgraded connection reads br for good: never pooled
		u.br = c.br
	}
	if w != nil && !w.poll() {
		u.wr = w
	} else if w != nil && w.err != nil {
		u.writeErr = fmt.Errorf("conn: the upgrade request was not written: %w", w.err)
	}
	resp.Body = u
	return resp
}

func (u *upgradedConn) Read(p []byte) (int, error) {
	if u.br != nil {
		if n := u.br.Buffered(); len(p) > n {
			p = p[:n]
		}
		n, err := u.br.Read(p)
		if u.br.Buffered() == 0 {
			u.br = nil
		}
		return n, err
	}
	return u.nc.Read(p)
}

func (u *upgradedConn) Write(p []byte) (int, error) {
	u.writeOnce.Do(func() {
		if u.wr == nil {
			return
		}
		if err := <-u.wr.done; err != nil && u.writeErr == nil {
			u.writeErr = fmt.Errorf("conn: the upgrade request was not written: %w", err)
		}
	})
	if u.writeErr != nil {
		return 0, u.writeErr
	}
	return u.nc.Write(p)
}

// CloseWrite half-closes the connection when the socket can (TCP, TLS), as
// net/http's upgraded bodies do.
func (u *upgradedConn) CloseWrite() error {
	if cw, ok := u.nc.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("conn: CloseWrite on %T: %w", u.nc, errors.ErrUnsupported)
}

// Close closes the connection and ends the exchange: Done(false, 0, nil), once.
func (u *upgradedConn) Close() error {
	err := net.ErrClosed
	u.closeOnce.Do(func() {
		err = u.nc.Close()
		if w := u.wr; w != nil {
			// A request body still being written: its writer ends with the
			// socket, or with its body closed if it waits on it.
			w.stopped.Store(true)
			w.stopOnce.Do(func() { w.body.Close() })
		}
		u.done.ExchangeEnded(false, 0, nil)
	})
	return err
}
