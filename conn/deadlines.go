package conn

import (
	"context"
	"net"
	"sync"
	"time"
)

// exchangeDeadlines serializes the socket deadlines of one exchange, which are
// set from several goroutines: the request context's end (a past deadline that
// nothing clears afterwards), the response header timeout (set by the writer,
// cleared when the head is read), a Close interrupting a blocked Read, the body
// drain, a failed request body (which interrupts as the context does) and an
// early response stopping the write.
type exchangeDeadlines struct {
	nc   net.Conn
	ctx  context.Context
	stop func() bool // stops the context watch; nil when the context cannot end

	mu         sync.Mutex
	dead       bool      // a past deadline is set for good
	readSet    bool      // a read deadline may be on the socket (cleared by endHead, release)
	writeSet   bool      // a write deadline may be on the socket (cleared by release)
	headDone   bool      // the final head was read: the header timeout no longer applies
	headExpiry time.Time // the header timeout's deadline, once set
}

// watch makes the end of the context interrupt the exchange's I/O.
func (d *exchangeDeadlines) watch() {
	if d.ctx.Done() != nil {
		d.stop = context.AfterFunc(d.ctx, d.interrupt)
	}
}

// interrupt sets a past deadline for good: blocked reads and writes return.
func (d *exchangeDeadlines) interrupt() {
	d.mu.Lock()
	d.dead = true
	d.readSet, d.writeSet = true, true
	d.nc.SetDeadline(aLongTimeAgo)
	d.mu.Unlock()
}

func (d *exchangeDeadlines) setRead(t time.Time) {
	d.mu.Lock()
	if !d.dead {
		d.readSet = true
		d.nc.SetReadDeadline(t)
	}
	d.mu.Unlock()
}

// startHeaderTimeout starts ResponseHeaderTimeout once the request is written.
func (d *exchangeDeadlines) startHeaderTimeout(timeout time.Duration) {
	if timeout <= 0 {
		return
	}
	d.mu.Lock()
	if !d.dead && !d.headDone {
		d.headExpiry = time.Now().Add(timeout)
		d.readSet = true
		d.nc.SetReadDeadline(d.headExpiry)
	}
	d.mu.Unlock()
}

// headerExpired reports whether the header timeout was set and has passed.
func (d *exchangeDeadlines) headerExpired() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.headExpiry.IsZero() && !time.Now().Before(d.headExpiry)
}

// endHead clears the header timeout: the body is bounded by the context only.
// An exchange that set no read deadline costs no call on the socket.
func (d *exchangeDeadlines) endHead() {
	d.mu.Lock()
	d.headDone = true
	if !d.dead && d.readSet {
		d.readSet = false
		d.nc.SetReadDeadline(time.Time{})
	}
	d.mu.Unlock()
}

// writeFailed bounds the response side's wait once the socket failed under
// the request's writer: a response the server sent before closing is still
// read, but nothing waits longer than grace for one. It does nothing once the
// final head was read (the body is read as usual) or the context ended.
func (d *exchangeDeadlines) writeFailed(grace time.Duration) {
	d.mu.Lock()
	if !d.dead && !d.headDone {
		d.readSet = true
		d.nc.SetReadDeadline(time.Now().Add(grace))
	}
	d.mu.Unlock()
}

// stopWrite ends a socket write that is blocked (an early response stops the
// request's body): a past write deadline, which nothing clears until the
// connection is closed. The read side is untouched.
func (d *exchangeDeadlines) stopWrite() {
	d.mu.Lock()
	d.writeSet = true
	d.nc.SetWriteDeadline(aLongTimeAgo)
	d.mu.Unlock()
}

// ctxErr returns the context's error if the context's end interrupted the I/O.
func (d *exchangeDeadlines) ctxErr() error {
	d.mu.Lock()
	dead := d.dead
	d.mu.Unlock()
	if dead {
		return d.ctx.Err()
	}
	return nil
}

// release stops the context watch and clears the deadlines (none were set in
// the common exchange: then the socket is not touched). It reports false when
// a past deadline was set (the context ended or a Close interrupted a read):
// the connection must then be closed.
func (d *exchangeDeadlines) release() bool {
	if d.stop != nil && !d.stop() {
		return false // the watch ran, or is running: its deadline may land at any time
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead {
		return false
	}
	if d.readSet || d.writeSet {
		d.readSet, d.writeSet = false, false
		d.nc.SetDeadline(time.Time{})
	}
	return true
}
