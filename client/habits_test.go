package client

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func gzipped(s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.Bytes()
}

// As net/http: gzip is asked for and undone transparently, unless the caller
// chose an encoding, asked for a range, or turned it off.
func TestGzipIsTransparentAsWithNetHTTP(t *testing.T) {
	const text = "a compressible body, a compressible body, a compressible body"
	var asked []string
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Header.Get("Accept-Encoding"))
		if r.Header.Get("Accept-Encoding") == "gzip" {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gzipped(text))
			return
		}
		io.WriteString(w, text)
	})
	c := newTestClient(t, Config{MaxConnsPerRoute: 1})
	req := newGet(t, srv.URL)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != text || !resp.Uncompressed || resp.ContentLength != -1 ||
		resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("Content-Length") != "" {
		t.Fatalf("decompressed: %q uncompressed=%v cl=%d header=%v", body, resp.Uncompressed, resp.ContentLength, resp.Header)
	}
	if _, ok := req.Header["Accept-Encoding"]; ok {
		t.Fatal("the caller's request was modified")
	}
	// The caller's own Accept-Encoding: the body is left alone.
	own := newGet(t, srv.URL)
	own.Header.Set("Accept-Encoding", "gzip")
	resp, err = c.RoundTrip(own)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(raw, gzipped(text)) || resp.Uncompressed {
		t.Fatalf("caller-chosen encoding was decoded: %q", raw)
	}
	off := newTestClient(t, Config{DisableCompression: true})
	if got := get(t, off, srv.URL); got != text {
		t.Fatalf("DisableCompression: %q", got)
	}
	if want := []string{"gzip", "gzip", ""}; strings.Join(asked, ",") != strings.Join(want, ",") {
		t.Fatalf("Accept-Encoding sent: %q, want %q", asked, want)
	}
	if st := c.Stats(); st.Idle != 1 || st.Routes[0].Opened != 1 {
		t.Fatalf("the connection was not re-used after gzip bodies: %+v", st)
	}
}

func TestCloseIdleConnectionsThroughHTTPClient(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c := newTestClient(t, Config{})
	hc := &http.Client{Transport: c}
	for i := 0; i < 3; i++ {
		get(t, c, srv.URL)
	}
	if st := c.Stats(); st.Idle != 1 {
		t.Fatalf("before: %+v", st)
	}
	hc.CloseIdleConnections()
	st := c.Stats()
	if st.Idle != 0 || st.Open != 0 || st.Routes[0].ClosedBy["close_idle"] != 1 {
		t.Fatalf("after CloseIdleConnections: %+v", st)
	}
	waitUntil(t, "the server sees the close", func() bool { return srv.closedConns.Load() == 1 })
	if got := get(t, c, srv.URL); got != "ok" {
		t.Fatalf("after: %q", got)
	}
}

func TestCloneMakesAnIndependentClientWithChangedSettings(t *testing.T) {
	srv := httptestTLS(t)
	c := newTestClient(t, Config{MaxConnsPerRoute: 3})
	if _, err := c.RoundTrip(newGet(t, srv.URL)); err == nil {
		t.Fatal("an untrusted certificate was accepted")
	}
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c2, err := c.Clone(func(cfg *Config) { cfg.TLSConfig = &tls.Config{RootCAs: pool} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c2.Close() })
	if got := get(t, c2, srv.URL); got != "tls ok" {
		t.Fatalf("clone: %q", got)
	}
	if c2.cfg.MaxConnsPerRoute != 3 {
		t.Fatalf("clone lost settings: %+v", c2.cfg)
	}
	if err := c.Shutdown(awaitCtx(t)); err != nil {
		t.Fatal(err)
	}
}

// Callers that wait more than a second for a connection are reported once,
// with the route, at WARN: long polls behind MaxConnsPerRoute are visible.
func TestLongWaitsForAConnectionAreLoggedOnceWithTheRoute(t *testing.T) {
	release := make(chan struct{})
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		io.WriteString(w, "ok")
	})
	var logs syncBuffer
	c := newTestClient(t, Config{MaxConnsPerRoute: 1, MaxIdleTime: 40 * time.Millisecond,
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
	waitUntil(t, "a long-wait warning", func() bool { return logs.count("MaxConnsPerRoute too small") > 0 })
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

// httptestTLS is a TLS test server answering "tls ok", whose certificate the
// client does not trust by default.
func httptestTLS(t *testing.T) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls ok") }))
	t.Cleanup(srv.Close)
	return srv
}
