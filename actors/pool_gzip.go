package actors

import (
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Transparent compression, as net/http's Transport does it: when the caller
// did not ask for an encoding itself (no Accept-Encoding, no Range) and
// PoolConfig.DisableCompression is false, the request is sent with
// "Accept-Encoding: gzip", and a gzip response is decompressed as it is read:
// its Content-Encoding and Content-Length are removed, ContentLength is -1 and
// Uncompressed is true. The caller's request is never modified: on HTTP/1.1
// the connection writes the extra field itself (conn.ExchangeRequest's
// AcceptGzip), without copying the header; an HTTP/2 stream gets a copy of
// the request whose header carries it (withGzip).

// wantsGzip reports whether req is sent with "Accept-Encoding: gzip".
func (p *Pool) wantsGzip(req *http.Request) bool {
	if p.cfg.DisableCompression || req.Method == http.MethodHead {
		return false
	}
	if _, ok := req.Header["Accept-Encoding"]; ok {
		return false
	}
	if _, ok := req.Header["Range"]; ok {
		return false // a gzip range of unknown offsets (golang/go#8923)
	}
	return true
}

// withGzip returns a copy of req whose header (a copy) has
// "Accept-Encoding: gzip".
func withGzip(req *http.Request) *http.Request {
	out := *req
	out.Header = make(http.Header, len(req.Header)+1)
	for k, v := range req.Header {
		out.Header[k] = v
	}
	out.Header["Accept-Encoding"] = acceptGzip
	return &out
}

var acceptGzip = []string{"gzip"}

// gunzip makes resp, an answer to a request sent with gzip asked for, decompress
// as it is read, when the server used gzip.
func gunzip(resp *http.Response) {
	if !strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") || resp.Body == http.NoBody {
		return
	}
	resp.Body = &gzipBody{body: resp.Body}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
}

// gzipBody decompresses a response body lazily: the gzip header is read on
// the first Read, so that a caller who only closes the body costs nothing.
// Read and Close are safe for concurrent use (a Close may interrupt a Read).
type gzipBody struct {
	body io.ReadCloser
	mu   sync.Mutex // guards zr and err
	zr   *gzip.Reader
	err  error
}

func (g *gzipBody) Read(p []byte) (int, error) {
	g.mu.Lock()
	if g.err != nil {
		err := g.err
		g.mu.Unlock()
		return 0, err
	}
	if g.zr == nil {
		g.mu.Unlock()
		zr, err := gzip.NewReader(g.body) // reads the header from the socket: not under the lock
		g.mu.Lock()
		if err != nil {
			g.err = err
			g.mu.Unlock()
			return 0, err
		}
		g.zr = zr
	}
	zr := g.zr
	g.mu.Unlock()
	return zr.Read(p)
}

func (g *gzipBody) Close() error { return g.body.Close() }
