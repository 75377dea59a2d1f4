package conn

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// Fuzz targets for everything this package parses or decides from a server's
// bytes. Seed corpora live in testdata/fuzz/<name>/ and run with every `go test`;
// `make fuzz` explores further.

// FuzzParseKeepAlive checks ParseKeepAlive and the idle cap Reusable derives
// from it: results in range, order of the values irrelevant, the cap strictly
// below the announced timeout.
func FuzzParseKeepAlive(f *testing.F) {
	f.Fuzz(func(t *testing.T, header string) {
		values := strings.Split(header, "\n")
		timeout, max, hasT, hasM := ParseKeepAlive(values)
		if timeout < 0 || timeout > maxKeepAliveNumber || max < 0 || max > maxKeepAliveNumber {
			t.Fatalf("out of range: timeout %d, max %d", timeout, max)
		}
		if (!hasT && timeout != 0) || (!hasM && max != 0) {
			t.Fatalf("value without its parameter: %d %v, %d %v", timeout, hasT, max, hasM)
		}
		reversed := make([]string, len(values))
		for i, v := range values {
			reversed[len(values)-1-i] = v
		}
		if t2, m2, h2, hm2 := ParseKeepAlive(reversed); t2 != timeout || m2 != max || h2 != hasT || hm2 != hasM {
			t.Fatalf("order of values changed the result")
		}
		if hasT {
			if t2, _, h2, _ := ParseKeepAlive([]string{fmt.Sprintf("timeout=%d", timeout)}); !h2 || t2 != timeout {
				t.Fatalf("timeout=%d does not parse back", timeout)
			}
		}
		req := &http.Request{Method: "GET", Header: http.Header{}}
		resp := &http.Response{StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Keep-Alive": values}}
		ok, idle := Reusable(req, resp)
		switch {
		case !ok && idle != 0:
			t.Fatalf("not reusable but idle cap %v", idle)
		case ok && hasM && max == 0:
			t.Fatal("reusable despite max=0")
		case ok && hasT && (idle <= 0 || idle >= time.Duration(timeout)*time.Second):
			t.Fatalf("timeout=%d gave idle cap %v", timeout, idle)
		case ok && !hasT && idle != 0:
			t.Fatalf("idle cap %v without a timeout", idle)
		}
	})
}

// FuzzReusable parses a response head with net/http and checks the re-use
// decision against RFC 9112's rules that http.ReadResponse exposes. It also
// checks the hand-written raw-head scan (rawHead.ambiguous) differentially
// against net/textproto's parse of the same head: Content-Length present in a
// chunked response, Transfer-Encoding in an HTTP/1.0 one.
func FuzzReusable(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string, method string) {
		req := &http.Request{Method: method, Header: http.Header{}}
		cr := &countingReader{r: strings.NewReader(raw), limit: -1}
		br := bufio.NewReaderSize(cr, 4096)
		br.Peek(1)
		var head rawHead
		head.mark(br, cr)
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return
		}
		if cr.n == head.socketAt { // the head arrived in one read: the scan must be exact
			tp := textproto.NewReader(bufio.NewReader(strings.NewReader(raw)))
			tp.ReadLine()
			hdr, err := tp.ReadMIMEHeader()
			if err != nil {
				t.Fatalf("ReadResponse took a head textproto refuses: %v", err)
			}
			want := false
			switch {
			case resp.TransferEncoding != nil:
				_, want = hdr["Content-Length"]
			case resp.ProtoMinor == 0:
				_, want = hdr["Transfer-Encoding"]
			}
			if got := head.ambiguous(resp, br, cr); got != want {
				t.Fatalf("raw head scan says %v, textproto's header %v", got, hdr)
			}
		}
		ok, idle := Reusable(req, resp)
		if ok2, idle2 := Reusable(req, resp); ok2 != ok || idle2 != idle {
			t.Fatal("Reusable is not deterministic")
		}
		switch {
		case idle < 0 || (!ok && idle != 0):
			t.Fatalf("reusable %v with idle cap %v", ok, idle)
		case ok && resp.Close:
			t.Fatal("reusable despite Connection: close, HTTP/1.0 or a close-delimited body")
		case ok && resp.ProtoMajor != 1:
			t.Fatalf("reusable on HTTP/%d", resp.ProtoMajor)
		case ok && resp.StatusCode == http.StatusSwitchingProtocols:
			t.Fatal("reusable after 101")
		}
	})
}

// FuzzExchange feeds arbitrary server bytes to a connection's exchange, for a
// GET, a HEAD, a POST with a small in-memory body (written inline) and a PUT
// with a 100 KiB streamed body (written by the request writer), and reads the
// body to its end: no panic, a typed error or a response, the exchange ended
// exactly once, a connection re-used only after a clean, reusable exchange,
// and never with bytes left in its reader (no desync). A 101
// response's body is the connection and ends the exchange, unreusable, when
// closed.
func FuzzExchange(f *testing.F) {
	opt := &Options{MaxResponseHeaderBytes: 4096, Go: func(fn func()) { fn() },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	f.Fuzz(func(t *testing.T, raw []byte, mode uint8) { exchangeOnce(t, opt, raw, mode) })
}

// exchangeOnce is FuzzExchange's body.
func exchangeOnce(t *testing.T, opt *Options, raw []byte, mode uint8) {
	{
		nc := &scriptConn{r: bytes.NewReader(raw)}
		c := newBareActor(nc, opt)
		method, body := "GET", io.Reader(nil)
		switch mode % 4 {
		case 1:
			method = "HEAD"
		case 2:
			method, body = "POST", strings.NewReader("a small body")
		case 3:
			method, body = "PUT", io.LimitReader(zeros{}, 100<<10)
		}
		req, err := http.NewRequest(method, "http://example.test/", body)
		if err != nil {
			t.Fatal(err)
		}
		dones, reused := 0, false
		m := &ExchangeRequest{ConnID: 1, Req: req, Done: EnderFunc(func(r bool, _ time.Duration) { dones++; reused = r })}
		r := c.exchange(m)
		resp, err := r.Resp, r.Err
		if err != nil {
			var ee *ExchangeError
			if !errors.As(err, &ee) || !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrNotSent) {
				t.Fatalf("error %v (%T): want an ExchangeError after the request was written", err, err)
			}
			if ee.GotByte != (len(raw) > 0) {
				t.Fatalf("GotByte %v with %d bytes from the server", ee.GotByte, len(raw))
			}
			if dones != 0 || !c.broken || !nc.closed {
				t.Fatalf("failed exchange: Done called %d times, broken %v, closed %v", dones, c.broken, nc.closed)
			}
			return
		}
		if resp.StatusCode < 100 || resp.StatusCode > 999 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if r.Early != nil {
			t.Fatalf("early response %v, though the body was written before the head was read", r.Early)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			rwc, ok := resp.Body.(io.ReadWriteCloser)
			if !ok || dones != 0 || !c.broken {
				t.Fatalf("101: body %T, Done called %d times, broken %v", resp.Body, dones, c.broken)
			}
			io.Copy(io.Discard, rwc)
			rwc.Close()
			rwc.Close()
			if dones != 1 || reused {
				t.Fatalf("101 body closed: Done called %d times, reused %v", dones, reused)
			}
			return
		}
		_, readErr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if dones != 1 {
			t.Fatalf("Done called %d times", dones)
		}
		if reused {
			if ok, _ := Reusable(req, resp); !ok || readErr != nil || c.broken || nc.closed {
				t.Fatalf("re-used after Reusable %v, read error %v, broken %v, closed %v", ok, readErr, c.broken, nc.closed)
			}
			if n := c.br.Buffered(); n > 0 {
				t.Fatalf("re-used with %d bytes left in the reader", n)
			}
		} else if !c.broken && !nc.closed {
			if ok, _ := Reusable(req, resp); ok && readErr == nil {
				// Fine: Done(false) on a reusable, intact exchange is allowed only
				// when the body ended early; it did not here.
				t.Fatal("a clean, reusable exchange was not re-used")
			}
		}
	}
}

// newBareActor makes a connection actor around nc without an actor system, as
// onDialResult does, for driving exchange directly.
func newBareActor(nc net.Conn, opt *Options) *Actor {
	c := &Actor{id: 1, opt: opt, nc: nc}
	c.rd = &countingReader{r: nc, limit: -1}
	c.wr = &countingWriter{w: nc}
	c.br = bufio.NewReaderSize(c.rd, 4096)
	c.bw = bufio.NewWriterSize(c.wr, 4096)
	return c
}

// scriptConn is a net.Conn whose peer wrote r and then closed; writes vanish.
type scriptConn struct {
	r       *bytes.Reader
	closed  bool
	written int // bytes written (and discarded)
	maxRead int // > 0: at most this many bytes a Read (a peer that sends in pieces)
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	if c.maxRead > 0 && len(p) > c.maxRead {
		p = p[:c.maxRead]
	}
	return c.r.Read(p)
}
func (c *scriptConn) Write(p []byte) (int, error)      { c.written += len(p); return len(p), nil }
func (c *scriptConn) Close() error                     { c.closed = true; return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }
