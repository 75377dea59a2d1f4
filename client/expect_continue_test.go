package client

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// "Expect: 100-continue" (RFC 9110 section 10.1.1): the body waits for the
// server's 100, a final status, or ExpectContinueTimeout.

// readBodyOf reads the body announced by head's Content-Length.
func (c *rawConn) readBodyOf(head *http.Request) (string, error) {
	n, _ := strconv.Atoi(head.Header.Get("Content-Length"))
	b := make([]byte, n)
	_, err := io.ReadFull(c.br, b)
	return string(b), err
}

// bodyArrivesWithin reports whether a byte arrives on c within d.
func (c *rawConn) bodyArrivesWithin(d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	_, err := c.br.Peek(1)
	return err == nil
}

func expectRequest(h *harness, path string) *http.Request {
	req := h.newRequest("PUT", path, strings.NewReader("payload"))
	req.Header.Set("Expect", "100-continue")
	return req
}

func TestExpectContinueSendsBodyOnlyAfter100(t *testing.T) {
	var early atomic.Bool
	var got atomic.Value
	h := newHarness(t, Config{ExpectContinueTimeout: time.Minute}, func(c *rawConn) {
		head, err := c.readHead()
		if err != nil {
			return
		}
		// The server's timing is the subject: no body byte may come before the 100.
		early.Store(c.bodyArrivesWithin(200 * time.Millisecond))
		c.write("HTTP/1.1 100 Continue\r\n\r\n")
		body, err := c.readBodyOf(head)
		if err != nil {
			return
		}
		got.Store(body)
		c.write(okResponse)
		c.serve(func(int, *http.Request) string { return okResponse })
	})
	var tl traceLog
	resp, body, err := h.do(tl.traced(expectRequest(h, "/upload")))
	if err != nil || resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("PUT with Expect: %v %q %v", resp, body, err)
	}
	if early.Load() {
		t.Error("the body was sent before the server's 100 Continue")
	}
	if got.Load() != "payload" {
		t.Errorf("server received body %q", got.Load())
	}
	for _, ev := range []string{"Wait100Continue", "Got100Continue", "Got1xxResponse 100"} {
		if !contains(tl.list(), ev) {
			t.Errorf("trace %q lacks %s", tl.list(), ev)
		}
	}
	h.mustGet("/next", "ok")
	wantLog(t, h.srv.requestLog(), "c1 PUT /upload", "c1 GET /next")
	h.settle()
}

func TestExpectContinueSkipsBodyWhenServerRefusesAndCloses(t *testing.T) {
	bodyBytes := make(chan int64, 1)
	h := newHarness(t, Config{ExpectContinueTimeout: time.Minute}, func(c *rawConn) {
		if c.id > 1 {
			c.serve(func(int, *http.Request) string { return okResponse })
			return
		}
		if _, err := c.readHead(); err != nil {
			return
		}
		c.write("HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		bodyBytes <- c.drainUntilClosed() // until the client closes
	})
	resp, _, err := h.do(expectRequest(h, "/upload"))
	if err != nil || resp.StatusCode != http.StatusExpectationFailed {
		t.Fatalf("PUT refused with 417: %v, %v", resp, err)
	}
	if n := <-bodyBytes; n != 0 {
		t.Errorf("server received %d body bytes after refusing; want 0", n)
	}
	h.mustGet("/next", "ok")
	wantLog(t, h.srv.requestLog(), "c1 PUT /upload", "c2 GET /next")
	h.settle()
}

// A final status without 100 on a connection that stays open: the server reads
// and discards the body, so the client sends it and keeps the connection.
func TestExpectContinueSendsBodyAfterFinalStatusOnOpenConnection(t *testing.T) {
	var got atomic.Value
	h := newHarness(t, Config{ExpectContinueTimeout: time.Minute}, func(c *rawConn) {
		head, err := c.readHead()
		if err != nil {
			return
		}
		c.write("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
		body, err := c.readBodyOf(head)
		if err != nil {
			return
		}
		got.Store(body)
		c.serve(func(int, *http.Request) string { return okResponse })
	})
	resp, _, err := h.do(expectRequest(h, "/upload"))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("PUT answered 401: %v, %v", resp, err)
	}
	h.mustGet("/next", "ok")
	if got.Load() != "payload" {
		t.Errorf("server discarded body %q; want the body sent", got.Load())
	}
	wantLog(t, h.srv.requestLog(), "c1 PUT /upload", "c1 GET /next")
	h.settle()
}

func TestExpectContinueTimeoutSendsBodyAnyway(t *testing.T) {
	h := newHarness(t, Config{ExpectContinueTimeout: 100 * time.Millisecond}, func(c *rawConn) {
		c.serve(func(_ int, req *http.Request) string { return okResponse }) // never sends 100
	})
	var tl traceLog
	resp, body, err := h.do(tl.traced(expectRequest(h, "/upload")))
	if err != nil || resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("PUT to a server that never sends 100: %v %q %v", resp, body, err)
	}
	ev := tl.list()
	if !contains(ev, "Wait100Continue") || contains(ev, "Got100Continue") {
		t.Errorf("trace %q; want Wait100Continue and no Got100Continue", ev)
	}
	h.mustGet("/next", "ok")
	wantLog(t, h.srv.requestLog(), "c1 PUT /upload", "c1 GET /next")
	h.settle()
}

// The server answers 100 and then its final response at once, while the request
// body (a pipe nobody writes to) blocks the writer: the response ends the
// exchange, the body is closed to free the writer, and Close does not hang.
func TestExpectContinueWriterBlockedOnBodyEndsWithTheResponse(t *testing.T) {
	h := newHarness(t, Config{ExpectContinueTimeout: time.Minute}, func(c *rawConn) {
		if _, err := c.readHead(); err != nil {
			return
		}
		c.write("HTTP/1.1 100 Continue\r\n\r\n" + okResponse)
		c.drainUntilClosed()
	})
	pr, pw := io.Pipe()
	req := h.newRequest("PUT", "/stream", pr)
	req.ContentLength = 10
	req.Header.Set("Expect", "100-continue")
	resp, body, err := h.do(req)
	if err != nil || resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("PUT with a stalled body: %v %q %v", resp, body, err)
	}
	if _, err := pw.Write([]byte("late")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("writing the request body after the exchange: %v; want the body closed", err)
	}
	h.settle()
	closed := make(chan error, 1)
	go func() { closed <- h.c.Close() }() // owned by this test, which waits below
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung on the request writer")
	}
}
