package client

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"
)

// Callers that wait more than a second for a connection are reported once,
// with the route, at WARN: long polls behind MaxConnsPerRoute are visible.
func TestLongWaitsForAConnectionAreLoggedOnceWithTheRoute(t *testing.T) {
	release := make(chan struct{})
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "ok")
	})
	var logs syncBuffer
	c := newClient(t, Config{MaxConnsPerRoute: 1, MaxIdleTime: 40 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	done := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() {
			resp, err := c.RoundTrip(newGet(t, srv.URL))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			done <- err
		}()
	}
	waitFor(t, "a long-wait warning", func() bool { return logs.count("MaxConnsPerRoute too small") > 0 })
	close(release)
	for i := 0; i < 3; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := logs.count("MaxConnsPerRoute too small"); n != 1 || logs.count(srv.URL) == 0 {
		t.Fatalf("%d warnings, want 1 naming the route:\n%s", n, logs.String())
	}
}

func TestLogsGoToTheConfiguredLoggerAndNothingToStdout(t *testing.T) {
	checkLeaks(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") }))
	defer srv.Close()

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	printed := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(r); printed <- b }() // owned by this test: ends when w closes

	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o := newObserved(t, Config{Logger: logger, MaxIdleTime: 20 * time.Millisecond})
	resp, err := getURL(o.c, srv.URL)
	if err == nil {
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	waitFor(t, "the idle connection to expire", func() bool { return o.c.Stats().Open == 0 })
	o.c.Close()

	os.Stdout = stdout
	w.Close()
	if out := <-printed; len(out) > 0 {
		t.Errorf("the library printed to stdout: %q", out)
	}
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"connactor: connection opened", "connactor: connection closed", "reason=idle_expiry"} {
		if !bytes.Contains(logs.Bytes(), []byte(want)) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
