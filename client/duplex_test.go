package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// Full duplex through the front door: the request's body is written
// while the response is read, as net/http's Transport does.

// An io.Pipe body fed from what the response says, against a net/http server
// in full-duplex mode that echoes each line as it arrives: before full duplex
// RoundTrip waited for the whole body and hung.
func TestPipeBodyEchoedLineByLineThroughHTTPClient(t *testing.T) {
	srv := newServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.EnableFullDuplex(); err != nil {
			t.Error(err)
			return
		}
		w.WriteHeader(http.StatusOK)
		rc.Flush()
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			fmt.Fprintf(w, "echo %s\n", sc.Text())
			rc.Flush()
		}
	}))
	c := newClient(t, Config{Logger: testLogger()})
	hc := &http.Client{Transport: c}
	for round := range 2 { // the second round re-uses the connection
		pr, pw := io.Pipe()
		req, _ := http.NewRequest("POST", srv.URL+"/echo", pr)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		for i := range 10 {
			fmt.Fprintf(pw, "line %d.%d\n", round, i)
			got, err := br.ReadString('\n')
			if want := fmt.Sprintf("echo line %d.%d\n", round, i); err != nil || got != want {
				t.Fatalf("read %q, %v; want %q", got, err, want)
			}
		}
		pw.Close()
		if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
			t.Fatalf("end of the echo: %q, %v", rest, err)
		}
		resp.Body.Close()
		waitIdle(t, c, 1)
	}
	if st := c.Stats(); st.Open != 1 {
		t.Errorf("%d connections open after two echoes; want 1 (re-used)", st.Open)
	}
	assertQuiet(t, c)
}

// A CONNECT request whose body is the tunnel's upstream and whose response body
// its downstream, against a server that opens the tunnel and echoes through it.
func TestConnectRequestBodyIsTheTunnel(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		head, err := c.readHead()
		if err != nil || head.Method != "CONNECT" {
			return
		}
		c.write("HTTP/1.1 200 Connection established\r\n\r\n")
		io.Copy(c.Conn, c.br) // the tunnel: echo until the client closes
	})
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("CONNECT", h.srv.URL(), pr)
	req.Host = "upstream.example:443"
	resp, err := h.c.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v, %v", resp, err)
	}
	buf := make([]byte, 5)
	for _, msg := range []string{"hello", "again"} {
		if _, err := io.WriteString(pw, msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != msg {
			t.Fatalf("through the tunnel: %q, %v; want %q", buf, err, msg)
		}
	}
	pw.Close()
	resp.Body.Close()
	wantLog(t, h.srv.requestLog(), "c1 CONNECT upstream.example:443")
	waitFor(t, "the tunnel's connection closed", func() bool { return h.c.Stats().Open == 0 })
	h.settle()
}

// A server that answers 401 or 413 before reading an 8 MiB upload, then closes
// the connection or keeps it: each of 5 uploads gets that answer (as with
// net/http), none is sent twice, and no connection is re-used after a body that
// was not sent in full.
func TestEarlyAnswerToALargeUploadReachesTheCaller(t *testing.T) {
	const size = 8 << 20
	for _, tc := range []struct {
		name, answer string
		close        bool
	}{
		{"413 then close", "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 9\r\n\r\ntoo large", true},
		{"401 on an open connection", "HTTP/1.1 401 Unauthorized\r\nContent-Length: 9\r\n\r\nwho is it", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{MaxConnsPerRoute: 1, MaxConnsTotal: 1}, func(c *rawConn) {
				if _, err := c.readHead(); err != nil {
					return
				}
				c.write(tc.answer)
				if !tc.close {
					c.drainUntilClosed() // reads what still comes, until the client closes
				}
			})
			hc := &http.Client{Transport: h.c}
			want := tc.answer[strings.LastIndex(tc.answer, "\n")+1:]
			for i := range 5 {
				req, _ := http.NewRequest("PUT", h.srv.URL()+"/upload", bytes.NewReader(make([]byte, size)))
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatalf("upload %d: %v; want the server's answer", i, err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(b) != want {
					t.Fatalf("upload %d: %d %q, %v", i, resp.StatusCode, b, err)
				}
			}
			if n := h.srv.accepted(); n != 5 {
				t.Errorf("%d connections for 5 uploads; want 5 (none re-used)", n)
			}
			if n := len(h.srv.requestLog()); n != 5 {
				t.Errorf("the server saw %d uploads; want 5", n)
			}
			h.settle()
		})
	}
}

// A request body whose Read fails: the caller's error comes back through
// http.Client (errors.Is holds), the request is not replayed even though it is
// idempotent and has GetBody, and the connection is not re-used.
func TestRequestBodyErrorReachesTheCallerAndIsNotReplayed(t *testing.T) {
	errDisk := errors.New("disk on fire")
	var heads atomic.Int32
	h := newHarness(t, Config{}, func(c *rawConn) {
		for {
			head, err := c.readHead()
			if err != nil {
				return
			}
			if head.Method == "GET" {
				c.write(okResponse)
				continue
			}
			heads.Add(1)
			c.drainUntilClosed() // the body never ends properly
			return
		}
	})
	hc := &http.Client{Transport: h.c}
	h.mustGet("/warm", "ok") // a pooled connection, so that a retry would be allowed
	req, _ := http.NewRequest("PUT", h.srv.URL()+"/file", io.MultiReader(strings.NewReader("partial"), &failAfter{err: errDisk}))
	req.GetBody = func() (io.ReadCloser, error) {
		return io.NopCloser(io.MultiReader(strings.NewReader("partial"), &failAfter{err: errDisk})), nil
	}
	_, err := hc.Do(req)
	if !errors.Is(err, errDisk) {
		t.Fatalf("PUT with a failing body: %v; want the body's error", err)
	}
	var ee *ExchangeError
	if errors.As(err, &ee) {
		t.Errorf("the body's error is disguised as a connection error: %v", err)
	}
	// A replay would have dialed a new connection before RoundTrip returned.
	if n := h.dials.Load(); n != 1 {
		t.Errorf("%d connections dialed; want 1 (the PUT was not replayed)", n)
	}
	waitFor(t, "the server to see the PUT", func() bool { return heads.Load() == 1 })
	h.settle()
}

type failAfter struct{ err error }

func (f *failAfter) Read([]byte) (int, error) { return 0, f.err }

// The same against net/http's own server, whose handler refuses the upload
// without reading it: the server answers, half-closes and discards for a while
// before it closes (closeWriteAndWait).
func TestEarlyAnswerFromANetHTTPServerReachesTheCaller(t *testing.T) {
	tr := newTracker(1, nil)
	srv := newServer(t, tr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	}))
	c := newClient(t, Config{MaxConnsPerRoute: 1, MaxConnsTotal: 1, Logger: testLogger()})
	for i := range 5 {
		req, _ := http.NewRequest("PUT", srv.URL+"/upload", bytes.NewReader(make([]byte, 8<<20)))
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatalf("upload %d: %v; want 413", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("upload %d: status %d", i, resp.StatusCode)
		}
	}
	if _, total, _ := tr.snapshot(); total != 5 {
		t.Errorf("%d connections for 5 refused uploads; want 5", total)
	}
	assertQuiet(t, c)
}
