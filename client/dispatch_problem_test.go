package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// newClosingServer starts a raw HTTP/1.1 server that answers the first request
// of each connection with "ok" and closes the connection, unanswered, when the
// second request arrives: the pooled connection has gone stale by the time it
// is re-used, which the client finds out after writing.
func newClosingServer(t *testing.T) (url string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = &atomic.Int64{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	wg.Add(1)
	go func() { // owned by wg; ends when the listener closes
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			mu.Lock()
			open = append(open, nc)
			mu.Unlock()
			wg.Add(1)
			go func() { // owned by wg; ends when the connection closes
				defer wg.Done()
				defer nc.Close()
				br := bufio.NewReader(nc)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil || n == 1 {
						return
					}
					io.Copy(io.Discard, req.Body)
					io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, nc := range open {
			nc.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String() + "/", conns
}

// primeIdleConn leaves one used, idle connection in the pool.
func primeIdleConn(t *testing.T, c *Client, url string) {
	t.Helper()
	h := c.Send(newGet(t, url), nil)
	resp, err := h.Await(awaitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body) // EOF releases the connection to the idle list
	resp.Body.Close()
}

type problemLog struct {
	mu       sync.Mutex
	events   []string
	errs     []error
	final    chan struct{}
	escalate bool
	panics   bool
}

func (p *problemLog) add(e string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, e)
	p.errs = append(p.errs, err)
}

func (p *problemLog) OnResponse(_ *Handle, resp *http.Response) {
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	p.add("response", nil)
	close(p.final)
}

func (p *problemLog) OnProblem(_ *Handle, err error, fatal bool) bool {
	if fatal {
		p.add("fatal", err)
		close(p.final)
		return false
	}
	p.add("problem", err)
	if p.panics {
		panic("handler bug in OnProblem")
	}
	return p.escalate
}

func TestStaleConnectionIsANonFatalProblemBeforeTheReplay(t *testing.T) {
	url, conns := newClosingServer(t)
	c := newClient(t, Config{MaxConnsPerRoute: 1})
	primeIdleConn(t, c, url)

	p := &problemLog{final: make(chan struct{})}
	h := c.Send(newGet(t, url), p)
	<-p.final
	if _, err := h.Await(awaitCtx(t)); err != nil {
		t.Fatalf("Await: %v", err)
	}
	if len(p.events) != 2 || p.events[0] != "problem" || p.events[1] != "response" {
		t.Fatalf("notifications %v, want [problem response]", p.events)
	}
	if !errors.Is(p.errs[0], ErrOutcomeUnknown) {
		t.Fatalf("problem %v, want ErrOutcomeUnknown (written, no response byte)", p.errs[0])
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2: the replay went to a fresh one", n)
	}
}

func TestHandlerMayEscalateANonFatalProblem(t *testing.T) {
	for _, tc := range []struct {
		name    string
		panics  bool
		wantErr error
	}{
		{"by returning true", false, ErrOutcomeUnknown},
		{"by panicking", true, ErrHandlerPanicked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, conns := newClosingServer(t)
			c := newClient(t, Config{MaxConnsPerRoute: 1})
			primeIdleConn(t, c, url)

			p := &problemLog{final: make(chan struct{}), escalate: true, panics: tc.panics}
			h := c.Send(newGet(t, url), p)
			<-p.final
			_, err := h.Await(awaitCtx(t))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Await: %v, want %v", err, tc.wantErr)
			}
			if len(p.events) != 2 || p.events[0] != "problem" || p.events[1] != "fatal" {
				t.Fatalf("notifications %v, want [problem fatal]", p.events)
			}
			if !errors.Is(p.errs[1], tc.wantErr) {
				t.Fatalf("fatal problem %v, want %v", p.errs[1], tc.wantErr)
			}
			if n := conns.Load(); n != 1 {
				t.Fatalf("%d connections, want 1: an escalated problem is not replayed", n)
			}
			if st := c.Stats(); st.Leased != 0 || st.InFlight != 0 {
				t.Fatalf("after the fatal problem: %+v", st)
			}
		})
	}
}

// A server that answers 413 before reading a large upload: Send's handler
// hears of it as a non-fatal problem before OnResponse, and may make it fatal.
func TestAnEarlyResponseIsANonFatalProblemBeforeTheResponse(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	})
	c := newClient(t, Config{})
	for _, escalate := range []bool{false, true} {
		var events []string
		done := make(chan struct{})
		h := c.Send(newUpload(t, srv.URL, 8<<20), HandlerFuncs{
			Response: func(_ *Handle, resp *http.Response) {
				events = append(events, "response "+resp.Status)
				resp.Body.Close()
				close(done)
			},
			Problem: func(_ *Handle, err error, fatal bool) bool {
				if !errors.Is(err, ErrEarlyResponse) {
					events = append(events, "other problem: "+err.Error())
				} else if fatal {
					events = append(events, "fatal early")
				} else {
					events = append(events, "early")
				}
				if fatal {
					close(done)
				}
				return escalate
			},
		})
		<-done
		want := "[early response 413 Request Entity Too Large]"
		if escalate {
			want = "[early fatal early]"
		}
		if got := fmt.Sprint(events); got != want {
			t.Fatalf("escalate=%v: %s, want %s", escalate, got, want)
		}
		if _, err := h.Await(awaitCtx(t)); escalate != (err != nil) {
			t.Fatalf("escalate=%v: Await: %v", escalate, err)
		}
	}
	assertQuiet(t, c)
}

func newUpload(t *testing.T, url string, n int) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, io.NopCloser(bytes.NewReader(make([]byte, n))))
	if err != nil {
		t.Fatal(err)
	}
	return req
}
