package conn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Full duplex: the request's body is written while the response is
// read.

func newRequest(t *testing.T, method string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, "http://example.test/", body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// The server answers at once and echoes each chunk of the request body as a
// chunk of the response: the caller writes a line, reads it back, and so on.
// Before full duplex the exchange waited for the whole body first and hung.
func TestBodyStreamsWhileTheResponseStreamsBack(t *testing.T) {
	f := newConnFixture(t)
	go func() { // owned by the test: ends when the fixture closes the server side
		br := bufio.NewReader(f.server)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.WriteString(f.server, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
		buf := make([]byte, 64)
		for {
			n, err := req.Body.Read(buf)
			if n > 0 {
				fmt.Fprintf(f.server, "%x\r\n%s\r\n", n, buf[:n])
			}
			if err != nil {
				break
			}
		}
		io.WriteString(f.server, "0\r\n\r\n")
		if _, err := http.ReadRequest(br); err == nil { // the next request on the connection
			io.WriteString(f.server, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext")
		}
	}()
	pr, pw := io.Pipe()
	r := f.exchange(t, newRequest(t, "POST", pr), false)
	if r.Err != nil || r.Early != nil {
		t.Fatalf("exchange: %v (early %v)", r.Err, r.Early)
	}
	br := bufio.NewReader(r.Resp.Body)
	for i := range 5 {
		line := fmt.Sprintf("line %d\n", i)
		if _, err := io.WriteString(pw, line); err != nil {
			t.Fatal(err)
		}
		got, err := br.ReadString('\n')
		if err != nil || got != line {
			t.Fatalf("echo of %q: %q, %v", line, got, err)
		}
	}
	pw.Close()
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("end of the echo: %q, %v", rest, err)
	}
	if rel := <-f.release; !rel.reusable {
		t.Fatal("a full exchange, body written and response read, was not reusable")
	}
	r = f.exchange(t, newGet(t, context.Background()), true)
	if r.Err != nil {
		t.Fatalf("next request on the connection: %v", r.Err)
	}
	if b, _ := io.ReadAll(r.Resp.Body); string(b) != "next" {
		t.Fatalf("next response %q", b)
	}
}

// zeros is an endless body that is not an in-memory reader.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// A server that answers 401 or 413 before reading an 8 MiB upload, then closes
// or keeps the connection: the caller gets the answer (net/http does), Early
// says the body was not sent in full, and the connection is not re-used.
func TestEarlyResponseToAnUploadIsReturned(t *testing.T) {
	const size = 8 << 20
	for _, tc := range []struct {
		name   string
		answer string
		close  bool
		body   func() io.Reader
	}{
		{"413 and close, in-memory body", "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 9\r\n\r\ntoo large", true,
			func() io.Reader { return bytes.NewReader(make([]byte, size)) }},
		{"413 and close, streamed body", "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 9\r\n\r\ntoo large", true,
			func() io.Reader { return io.LimitReader(zeros{}, size) }},
		{"401, connection kept", "HTTP/1.1 401 Unauthorized\r\nContent-Length: 9\r\n\r\nwho is it", false,
			func() io.Reader { return bytes.NewReader(make([]byte, size)) }},
		{"401, connection kept, streamed body", "HTTP/1.1 401 Unauthorized\r\nContent-Length: 9\r\n\r\nwho is it", false,
			func() io.Reader { return io.LimitReader(zeros{}, size) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newConnFixture(t)
			go func() { // owned by the test: ends when the fixture closes the server side
				br := bufio.NewReader(f.server)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(f.server, tc.answer)
				if tc.close {
					f.server.Close() // unread body: the kernel resets the connection
				}
			}()
			req := newRequest(t, "PUT", tc.body())
			req.ContentLength = size
			r := f.exchange(t, req, false)
			if r.Err != nil {
				t.Fatalf("early answer: %v; want the response", r.Err)
			}
			b, err := io.ReadAll(r.Resp.Body)
			r.Resp.Body.Close()
			want := tc.answer[strings.LastIndex(tc.answer, "\n")+1:]
			if err != nil || string(b) != want {
				t.Fatalf("body %q, %v; want %q", b, err, want)
			}
			var ee *EarlyResponseError
			if !errors.Is(r.Early, ErrEarlyResponse) || !errors.As(r.Early, &ee) || ee.StatusCode != r.Resp.StatusCode {
				t.Errorf("Early = %v; want an EarlyResponseError for status %d", r.Early, r.Resp.StatusCode)
			}
			if rel := <-f.release; rel.reusable {
				t.Error("connection re-used after a body that was not sent in full")
			}
		})
	}
}

// A request body whose Read fails: the caller gets the body's own error
// (errors.Is holds), not a connection error, whether the failure comes before
// the response head or while the response streams.
func TestRequestBodyErrorReachesTheCaller(t *testing.T) {
	errBody := errors.New("the body gave up")
	for _, beforeHead := range []bool{true, false} {
		t.Run(map[bool]string{true: "before the head", false: "while the response streams"}[beforeHead], func(t *testing.T) {
			f := newConnFixture(t)
			go func() { // owned by the test: ends when the fixture closes the server side
				br := bufio.NewReader(f.server)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if !beforeHead {
					io.WriteString(f.server, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
				}
				io.Copy(io.Discard, req.Body) // waits for a body that never ends properly
			}()
			pr, pw := io.Pipe()
			headSeen := make(chan struct{})
			go func() { // owned by the test: ends when the exchange reads or closes the pipe
				pw.Write([]byte("some"))
				if !beforeHead {
					<-headSeen
				}
				pw.CloseWithError(errBody)
			}()
			r := f.exchange(t, newRequest(t, "POST", pr), false)
			close(headSeen)
			err := r.Err
			if !beforeHead {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				_, err = io.ReadAll(r.Resp.Body)
			}
			if !errors.Is(err, errBody) {
				t.Fatalf("error %v; want the body's error", err)
			}
			var be *RequestBodyError
			var ee *ExchangeError
			if !errors.As(err, &be) || errors.As(err, &ee) {
				t.Errorf("error %v (%T); want a *RequestBodyError, not an *ExchangeError", err, err)
			}
			if beforeHead {
				return // no response: Done is not called
			}
			if rel := <-f.release; rel.reusable {
				t.Error("connection re-used after the request's body failed")
			}
		})
	}
}

// A body whose Read fails before the response: the exchange returns with the
// body's error even though the server never answers.
func TestRequestBodyErrorDoesNotWaitForTheServer(t *testing.T) {
	f := newConnFixture(t)
	go io.Copy(io.Discard, f.server) // owned by the test: ends when the fixture closes the server side
	errBody := errors.New("disk on fire")
	body := io.MultiReader(strings.NewReader("partial"), &failingReader{err: errBody})
	done := make(chan ExchangeResponse, 1)
	go func() { done <- f.exchange(t, newRequest(t, "POST", io.NopCloser(body)), false) }() // owned by the test
	select {
	case r := <-done:
		if !errors.Is(r.Err, errBody) || !errors.Is(r.Err, ErrOutcomeUnknown) {
			t.Fatalf("exchange: %v; want the body's error, outcome unknown", r.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the exchange waited for a server that never answers")
	}
}

type failingReader struct{ err error }

func (r *failingReader) Read([]byte) (int, error) { return 0, r.err }
