package conn

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// Draining limits for a body closed before its end (OkHttp discards the same
// way): a small remainder is read and discarded so the connection can be
// re-used; a larger one, or one that does not arrive quickly, closes it.
const (
	maxDrainBytes = 64 << 10
	maxDrainTime  = 50 * time.Millisecond
)

// body streams a response body from the connection and ends the exchange exactly
// once: at EOF, on a read error, or on Close. Read and Close are safe for
// concurrent use (Close waits for a blocked Read; the request context's end
// interrupts it).
type body struct {
	mu        sync.Mutex
	c         *Actor // lent: only its socket and reader are used
	ctx       context.Context
	rc        io.ReadCloser
	done      func(reusable bool, idle time.Duration)
	reusable  bool
	idle      time.Duration
	stopCtx   func() bool
	remaining int64 // Content-Length minus bytes read; -1 when unknown
	finished  bool
	err       error // returned by reads after the end
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		if b.err == nil {
			return 0, io.EOF
		}
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	if b.remaining > 0 {
		b.remaining -= int64(n)
	}
	switch {
	case err == io.EOF:
		b.finish(true)
	case err != nil:
		if ctxErr := b.ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		b.err = err
		b.finish(false)
	}
	return n, err
}

func (b *body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return nil
	}
	b.err = errBodyClosed
	// A body whose context has ended (an aborted request) is never drained:
	// finish closes the connection anyway, so draining would only delay Close.
	if !b.reusable || b.remaining > maxDrainBytes || b.ctx.Err() != nil {
		b.finish(false)
		return nil
	}
	b.c.nc.SetReadDeadline(time.Now().Add(maxDrainTime))
	n, err := io.CopyN(io.Discard, b.rc, maxDrainBytes+1)
	b.finish(err == io.EOF && n <= maxDrainBytes)
	return nil
}

// errBodyClosed is returned by reads after Close, as net/http's bodies do.
var errBodyClosed = errors.New("connactor: read on closed response body")

// finish ends the exchange: it stops the context watch and reports whether the
// connection may be re-used. Called with mu held (or before the body is shared).
func (b *body) finish(ok bool) {
	b.finished = true
	if b.stopCtx != nil && !b.stopCtx() {
		ok = false // the context ended: a past deadline was set on the socket
	}
	if ok {
		b.c.nc.SetDeadline(time.Time{})
	} else {
		b.c.broken = true
		b.c.nc.Close()
	}
	b.done(ok && b.reusable, b.idle)
}
