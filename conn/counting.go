package conn

import (
	"errors"
	"io"
	"sync/atomic"
)

// countingReader sits under the connection's bufio.Reader: it counts response
// bytes and, while limit >= 0, refuses to read more than limit bytes (the
// response header budget, as net/http's persistConn.readLimit). Only the
// goroutine reading the response uses it.
type countingReader struct {
	r     io.Reader
	n     int64 // bytes read in the current exchange
	limit int64 // bytes still allowed; -1 = unlimited
}

var errHeaderLimit = errors.New("header limit reached")

func (r *countingReader) Read(p []byte) (int, error) {
	if r.limit == 0 {
		return 0, errHeaderLimit
	}
	if r.limit > 0 && int64(len(p)) > r.limit {
		p = p[:r.limit]
	}
	n, err := r.r.Read(p)
	r.n += int64(n)
	if r.limit > 0 {
		r.limit -= int64(n)
	}
	return n, err
}

// countingWriter sits under the connection's bufio.Writer and counts bytes that
// reached the socket: zero means a replay cannot duplicate anything. n is read
// by the response side while a request is written on its own goroutine.
//
// err is the socket's first write error in the exchange: it tells a request
// whose body failed from one whose connection failed. It is touched only by the
// goroutine writing the request.
type countingWriter struct {
	w   io.Writer
	n   atomic.Int64
	err error
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.n.Add(int64(n))
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}
