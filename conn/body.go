package conn

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Draining limits for a body closed before its end (OkHttp discards the same
// way): a small remainder is read and discarded so the connection can be
// re-used; a larger one, or one that does not arrive quickly, closes it.
const (
	maxDrainBytes = 64 << 10
	maxDrainTime  = 50 * time.Millisecond
)

// maxWriteWait is how long the end of a response waits for a request write still
// running on its own goroutine (see reqWriter) before giving up on the
// connection, as net/http's maxWriteWaitBeforeConnReuse.
const maxWriteWait = 50 * time.Millisecond

// body streams a response body from the connection and ends the exchange exactly
// once: at EOF, on a read error, or on Close.
//
// A body that is never read to its end nor closed holds its connection: the
// route counts it as leased (Stats.Leased) and no other request can use it.
//
// Read and Close are safe for concurrent use. A Close that finds a Read blocked
// on the socket interrupts it (the Read returns errBodyClosed) and the connection
// is discarded, as closing a net/http body from another goroutine does; the end
// of the request's context interrupts a blocked Read too.
type body struct {
	mu        sync.Mutex // serializes Read and Close
	c         *Actor     // lent: only its socket and reader are used
	rc        io.ReadCloser
	dl        *exchangeDeadlines // &deadlines
	deadlines exchangeDeadlines
	w         *reqWriter // non-nil when the request has a body (written on its own goroutine)
	done      Ender
	reusable  bool
	idle      time.Duration
	remaining int64 // Content-Length minus bytes read; -1 when unknown
	finished  bool
	lent      bool  // counted in c.lent (the body was handed out): uncounted at the end
	err       error // returned by reads after the end
	failure   error // the read error the server's side caused, for ExchangeEnded

	// io is where a Read stands, for a Close from another goroutine: ioIdle,
	// ioReading (set by Read before it reads the socket), ioInterrupted (set
	// by Close over ioReading: the Read finds the connection interrupted).
	io atomic.Int32
}

const (
	ioIdle int32 = iota
	ioReading
	ioInterrupted
)

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		if b.err == nil {
			return 0, io.EOF
		}
		return 0, b.err
	}
	b.io.Store(ioReading)
	n, err := b.rc.Read(p)
	interrupted := b.io.Swap(ioIdle) == ioInterrupted
	if b.remaining > 0 {
		b.remaining -= int64(n)
	}
	switch {
	case interrupted:
		// Close ran while this Read was blocked and set a past deadline on the
		// socket: whatever the read returned, the connection is done for.
		b.err = errBodyClosed
		b.finish(false)
		if err == nil || err == io.EOF || isTimeout(err) {
			err = errBodyClosed
		}
	case err == io.EOF:
		b.finish(true)
	case err != nil:
		b.failure = err
		if ctxErr := b.dl.ctxErr(); ctxErr != nil {
			err, b.failure = ctxErr, nil
		} else if b.w != nil {
			if bodyErr := b.w.bodyFailure(); bodyErr != nil {
				err, b.failure = bodyErr, nil // the request's body failed and interrupted the exchange
			}
		}
		b.err = err
		b.finish(false)
	}
	return n, err
}

// Close ends the exchange. It returns at once when the rest of the body is known
// to exceed maxDrainBytes (the connection is closed); otherwise it reads and
// discards the rest for at most maxDrainBytes and maxDrainTime, and re-uses the
// connection if the body ended within them. It always returns nil.
func (b *body) Close() error {
	if b.io.CompareAndSwap(ioReading, ioInterrupted) {
		b.dl.interrupt()
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return nil
	}
	b.err = errBodyClosed
	// A body whose context has ended (an aborted request) is never drained:
	// finish closes the connection anyway, so draining would only delay Close.
	if !b.reusable || b.remaining > maxDrainBytes || b.dl.ctx.Err() != nil {
		b.finish(false)
		return nil
	}
	b.dl.setRead(time.Now().Add(maxDrainTime))
	n, err := io.CopyN(io.Discard, b.rc, maxDrainBytes+1)
	b.finish(err == io.EOF && n <= maxDrainBytes)
	return nil
}

// abandon ends an exchange whose answer its holder gave up on (see
// unanswered): the context watch and a running request write stop, later
// reads fail, and Done is not called.
func (b *body) abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.finished, b.err = true, errBodyClosed
	b.dl.release()
	if b.w != nil {
		b.w.stop(b.dl)
	}
	b.unlend()
}

// unlend gives the connection's buffers back to it, once the body no longer
// touches them (see Actor.lent).
func (b *body) unlend() {
	if b.lent {
		b.lent = false
		b.c.lent.Add(-1)
	}
}

// errBodyClosed is returned by reads after Close, as net/http's bodies do.
var errBodyClosed = errors.New("connactor: read on closed response body")

// finish ends the exchange: it stops the context watch, waits (briefly) for a
// request write still running if the connection could be re-used, stops it
// otherwise, and reports whether the connection may be re-used.
// Called with mu held (or before the body is shared).
//
// Bytes already read from the socket beyond the response's end (past its
// Content-Length, after a response without a body) belong to no request: the
// next request would take them for its response (response desync).
// Such a connection is never re-used; checking costs a field read.
func (b *body) finish(ok bool) {
	b.finished = true
	if !b.dl.release() {
		ok = false // the context ended or a Close interrupted: a past deadline is on the socket
	}
	if ok && b.c.br.Buffered() > 0 {
		ok = false
	}
	if ok && b.reusable && b.w != nil {
		ok = b.w.waitWritten(maxWriteWait)
	}
	if !ok {
		// The body holds the connection until ExchangeEnded (see Actor):
		// no message of the actor's touches broken meanwhile.
		b.c.discard()
	}
	if b.w != nil {
		b.w.stop(b.dl) // a write still running ends with the response (as net/http)
	}
	b.unlend()
	b.done.ExchangeEnded(ok && b.reusable, b.idle, b.failure)
}
