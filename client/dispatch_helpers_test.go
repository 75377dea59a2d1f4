package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dispatchServer is an httptest server that counts, on the server side, the
// requests of each path and the connections it accepted and saw closed.
type dispatchServer struct {
	*httptest.Server
	newConns    atomic.Int64
	closedConns atomic.Int64
	mu          sync.Mutex
	paths       map[string]int
}

// waitOpenAtMost waits until the server sees at most n connections open. It
// learns of a close when its read ends, which may be after it accepted the
// next connection: a check right after the client's own must wait for it to
// catch up.
func (s *dispatchServer) waitOpenAtMost(t *testing.T, n int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("the server to see at most %d connections open", n), func() bool {
		return s.newConns.Load()-s.closedConns.Load() <= n
	})
}

func newDispatchServer(t *testing.T, h http.HandlerFunc) *dispatchServer {
	t.Helper()
	s := &dispatchServer{paths: map[string]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths[r.URL.Path]++
		s.mu.Unlock()
		h(w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.newConns.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closedConns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *dispatchServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paths[path]
}

// newTestClient starts a client that the test closes at its end (after the
// servers registered before it, since cleanups run last-in first-out).
func newTestClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// waitUntil waits for a state the test cannot be told about by an event (the
// pool's counts), polling it; it fails the test after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func awaitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// finals counts the final notifications of a set of Handles, by request
// index (the "i" query parameter), and every notification at all.
type finals struct {
	mu       sync.Mutex
	byIndex  map[string]int
	all      atomic.Int64
	nonFatal atomic.Int64
	wg       sync.WaitGroup
}

func newFinals(n int) *finals {
	f := &finals{byIndex: map[string]int{}}
	f.wg.Add(n)
	return f
}

func (f *finals) final(h *Handle) {
	f.all.Add(1)
	f.mu.Lock()
	f.byIndex[h.Request().URL.Query().Get("i")]++
	f.mu.Unlock()
	f.wg.Done()
}

func (f *finals) handler() Handler {
	return HandlerFuncs{
		Response: func(h *Handle, resp *http.Response) {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			f.final(h)
		},
		Problem: func(h *Handle, err error, fatal bool) bool {
			if fatal {
				f.final(h)
			} else {
				f.nonFatal.Add(1)
			}
			return false
		},
	}
}

// syncBuffer is a log sink for tests that read what the client logged.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
