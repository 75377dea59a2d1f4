package conn

import (
	"bufio"
	"io"
	"sync"
)

// The connections' 4 KiB read and write buffers are pooled: a connection that
// closes gives them to the next one dialed (unless something outside its actor
// may still hold them, see Actor.lent), so that under churn (a dial per
// request, routes200) a dial does not allocate 8 KiB.
var (
	readerPool sync.Pool // *bufio.Reader of bufSize
	writerPool sync.Pool // *bufio.Writer of bufSize
)

const bufSize = 4096

func newReader(r io.Reader) *bufio.Reader {
	if v, ok := readerPool.Get().(*bufio.Reader); ok {
		v.Reset(r)
		return v
	}
	return bufio.NewReaderSize(r, bufSize)
}

func newWriter(w io.Writer) *bufio.Writer {
	if v, ok := writerPool.Get().(*bufio.Writer); ok {
		v.Reset(w)
		return v
	}
	return bufio.NewWriterSize(w, bufSize)
}

func putReader(br *bufio.Reader) {
	br.Reset(nil)
	readerPool.Put(br)
}

func putWriter(bw *bufio.Writer) {
	bw.Reset(nil)
	writerPool.Put(bw)
}
