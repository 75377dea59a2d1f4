package conn

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"
)

// scripted runs one exchange of method on a bare connection actor whose server
// wrote raw and closed, reads the body to its end, and returns what the
// exchange decided.
type scripted struct {
	resp     *http.Response
	body     string
	readErr  error
	err      error
	dones    int
	reusable bool
	c        *Actor
	nc       *scriptConn
}

func runScripted(t *testing.T, method, raw string) scripted {
	t.Helper()
	opt := &Options{MaxResponseHeaderBytes: 4096, Go: func(fn func()) { fn() },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	nc := &scriptConn{r: bytes.NewReader([]byte(raw))}
	s := scripted{c: newBareActor(nc, opt), nc: nc}
	req, err := http.NewRequest(method, "http://example.test/", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := &ExchangeRequest{ConnID: 1, Req: req, Done: EnderFunc(func(r bool, _ time.Duration) { s.dones++; s.reusable = r })}
	r := s.c.exchange(m)
	s.resp, s.err = r.Resp, r.Err
	if s.err != nil {
		return s
	}
	var b []byte
	b, s.readErr = io.ReadAll(s.resp.Body)
	s.body = string(b)
	s.resp.Body.Close()
	if s.dones != 1 {
		t.Fatalf("Done called %d times", s.dones)
	}
	return s
}

// Response desync: bytes the response did not declare (beyond a
// Content-Length body, after a response without a body) belong to no request.
// A connection that has them is never re-used: the next request would read them
// as its own response.
func TestConnectionWithBytesBeyondTheResponseIsNotReused(t *testing.T) {
	const next = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nWRONG"
	for _, tc := range []struct{ name, method, raw, body string }{
		{"beyond Content-Length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + next, "ok"},
		{"one stray byte", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok\n", "ok"},
		{"after 204", "GET", "HTTP/1.1 204 No Content\r\n\r\n" + next, ""},
		{"after 304", "GET", "HTTP/1.1 304 Not Modified\r\n\r\n" + next, ""},
		{"after Content-Length: 0", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" + next, ""},
		{"after a HEAD response", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n" + next, ""},
		{"after a chunked body", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n" + next, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runScripted(t, tc.method, tc.raw)
			if s.err != nil || s.readErr != nil || s.body != tc.body {
				t.Fatalf("exchange: %v, body %q (read error %v); want %q", s.err, s.body, s.readErr, tc.body)
			}
			if s.reusable {
				t.Error("the connection was re-used with undeclared bytes waiting")
			}
			if !s.c.broken || !s.nc.closed {
				t.Errorf("connection left open (broken %v, closed %v)", s.c.broken, s.nc.closed)
			}
		})
	}
}

// The same responses without the stray bytes keep their connection.
func TestConnectionWithNothingBeyondTheResponseIsReused(t *testing.T) {
	for _, tc := range []struct{ name, method, raw string }{
		{"Content-Length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
		{"204", "GET", "HTTP/1.1 204 No Content\r\n\r\n"},
		{"HEAD", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"},
		{"chunked", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
		{"HTTP/1.0 keep-alive", "GET", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s := runScripted(t, tc.method, tc.raw); s.err != nil || s.readErr != nil || !s.reusable {
				t.Fatalf("exchange: %v (read error %v), reusable %v; want a clean, reusable exchange", s.err, s.readErr, s.reusable)
			}
		})
	}
}

// No request is written to a connection whose reader holds bytes nobody asked
// for: the exchange fails as stale, with nothing written (so it may be replayed).
func TestExchangeRefusesConnectionWithBytesWaiting(t *testing.T) {
	opt := &Options{MaxResponseHeaderBytes: 4096, Go: func(fn func()) { fn() },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	nc := &scriptConn{r: bytes.NewReader([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nWRONG"))}
	c := newBareActor(nc, opt)
	c.served = 1
	if _, err := c.br.Peek(1); err != nil { // as the idle watch's peek does
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "http://example.test/", nil)
	err := c.exchange(&ExchangeRequest{ConnID: 1, Req: req, Reused: true, Done: EnderFunc(func(bool, time.Duration) { t.Error("Done called") })}).Err
	var ee *ExchangeError
	if !errors.As(err, &ee) || ee.Written || !errors.Is(err, ErrStaleConn) || !errors.Is(err, ErrNotSent) {
		t.Fatalf("exchange with bytes waiting: %v; want ErrStaleConn, nothing written", err)
	}
	if nc.written != 0 || !nc.closed {
		t.Errorf("%d bytes written, closed %v; want nothing written and the connection closed", nc.written, nc.closed)
	}
}

// Request smuggling's shape: Content-Length together with Transfer-Encoding: chunked
// (RFC 9112 section 6.3) means a party on the way framed the message one way
// and we the other. http.ReadResponse drops the Content-Length and reads the
// chunks (as net/http does, the response is returned); the connection is
// closed after it, since the next response may start anywhere.
func TestContentLengthWithChunkedClosesTheConnection(t *testing.T) {
	const chunks = "\r\n\r\n2\r\nok\r\n0\r\n\r\n"
	for _, tc := range []struct{ name, raw string }{
		{"Content-Length first", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked" + chunks},
		{"Content-Length last, lower case", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\ncontent-length: 2" + chunks},
		{"Content-Length mixed case among others", "HTTP/1.1 200 OK\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\nCONTENT-length: 40\r\nX-B: 2" + chunks},
		{"after 1xx", "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked" + chunks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runScripted(t, "GET", tc.raw)
			if s.err != nil || s.readErr != nil || s.body != "ok" {
				t.Fatalf("exchange: %v, body %q (read error %v); want the chunked body \"ok\"", s.err, s.body, s.readErr)
			}
			if s.reusable {
				t.Error("the connection was re-used")
			}
		})
	}
}

// The raw head is looked at without a copy, while it is still in the reader's
// buffer. A head that arrived in pieces is gone by then: the check must not be
// fooled, so such a chunked response is not re-used either (a cost paid only
// by chunked heads larger than the 4 KiB buffer or sent in pieces).
func TestContentLengthWithChunkedIsCaughtInAHeadThatArrivesInPieces(t *testing.T) {
	opt := &Options{MaxResponseHeaderBytes: 4096, Go: func(fn func()) { fn() },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, raw := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n",
	} {
		nc := &scriptConn{r: bytes.NewReader([]byte(raw)), maxRead: 7}
		c := newBareActor(nc, opt)
		req, _ := http.NewRequest("GET", "http://example.test/", nil)
		reusable := true
		r := c.exchange(&ExchangeRequest{ConnID: 1, Req: req, Done: EnderFunc(func(r bool, _ time.Duration) { reusable = r })})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		resp := r.Resp
		if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "ok" {
			t.Fatalf("body %q, %v", b, err)
		}
		if reusable {
			t.Errorf("%q arriving 7 bytes at a time: connection re-used", raw)
		}
	}
}

// HTTP/1.0 has no Transfer-Encoding (RFC 9112 section 6.1): a 1.0 response
// that carries one is framed wrongly whatever ReadResponse made of it.
func TestHTTP10ResponseWithTransferEncodingIsNotReused(t *testing.T) {
	s := runScripted(t, "GET", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nok")
	if s.err != nil || s.readErr != nil {
		t.Fatalf("exchange: %v (read error %v)", s.err, s.readErr)
	}
	if s.reusable {
		t.Error("HTTP/1.0 response with Transfer-Encoding re-used its connection")
	}
}
