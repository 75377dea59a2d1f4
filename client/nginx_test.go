package client

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const nginxBin = "/usr/sbin/nginx"

// startNginx runs nginx from nginxBin in the foreground with a config of its
// own in a temp dir, listening on a free loopback port, and stops it at the end
// of the test. Under CI=true a missing nginx fails the test; elsewhere it skips,
// loudly.
func startNginx(t *testing.T, httpBlock string) (url, dir string) {
	t.Helper()
	if _, err := os.Stat(nginxBin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("nginx is required under CI (.ci/run installs it): %v", err)
		}
		t.Skipf("SKIPPED: %s not found (apt-get install nginx-light, or run .ci/run); this test runs under CI", nginxBin)
	}
	dir = t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nginx binds it next; a loopback port is not reused that fast
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // workers need the root-owned temp dir
	}
	conf := fmt.Sprintf(`daemon off;
master_process on;
worker_processes 1;
%s
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 1024; }
http {
	access_log %[2]s/access.log;
	client_body_temp_path %[2]s/client_body;
	proxy_temp_path %[2]s/proxy;
	fastcgi_temp_path %[2]s/fastcgi;
	uwsgi_temp_path %[2]s/uwsgi;
	scgi_temp_path %[2]s/scgi;
	%[3]s
	server {
		listen %[4]s;
		location / { return 200 "ok $request_uri\n"; }
	}
}
`, user, dir, httpBlock, addr)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginxBin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	startDaemon(t, cmd, addr, filepath.Join(dir, "error.log"))
	return "http://" + addr, dir
}

// Real nginx closes each connection after 3 requests ("Connection: close" on
// the third answer) and idle ones after 1s: 500 sequential and 500 concurrent
// requests all succeed, none needing a retry, each reaching nginx once.
func TestRealNginxWithKeepAliveLimitsServesEveryRequest(t *testing.T) {
	url, dir := startNginx(t, "keepalive_requests 3;\n\tkeepalive_timeout 1s;")
	c, err := New(Config{MaxConnsPerRoute: 8, MaxConnsTotal: 8, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var gotConns atomic.Int64
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { gotConns.Add(1) }}
	get := func(path string) error {
		req, err := http.NewRequest("GET", url+path, nil)
		if err != nil {
			return err
		}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := c.RoundTrip(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 || string(b) != "ok "+path+"\n" {
			return fmt.Errorf("%s: %d %q", path, resp.StatusCode, b)
		}
		return nil
	}

	for i := 0; i < 500; i++ {
		if i == 250 {
			// Past keepalive_timeout: nginx closes the idle connection, the idle
			// watch removes it, and the next request dials.
			time.Sleep(1300 * time.Millisecond)
		}
		if err := get(fmt.Sprintf("/seq/%d", i)); err != nil {
			t.Fatalf("sequential request %d: %v", i, err)
		}
	}
	if n := gotConns.Load(); n != 500 {
		t.Errorf("500 sequential requests took %d connections; a retry happened", n)
	}

	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := 0; i < 500; i++ {
		wg.Add(1)
		go func() { // owned by wg
			defer wg.Done()
			if err := get(fmt.Sprintf("/par/%d", i)); err != nil {
				if failed.Add(1) <= 5 {
					t.Errorf("concurrent request %d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of 500 concurrent requests failed", n)
	}

	st := c.Stats()
	if st.Leased != 0 || st.InFlight != 0 || st.Pending != 0 {
		t.Errorf("after the runs: leased %d, in flight %d, pending %d", st.Leased, st.InFlight, st.Pending)
	}
	if len(st.Routes) != 1 {
		t.Fatalf("routes: %+v", st.Routes)
	}
	r := st.Routes[0]
	if r.Open > r.Max || r.Reuses > 2*r.Opened || r.Leases != uint64(gotConns.Load()) {
		t.Errorf("route %s: open %d (max %d), %d leases, %d re-uses on %d connections; at most 2 re-uses each",
			r.Route, r.Open, r.Max, r.Leases, r.Reuses, r.Opened)
	}
	t.Logf("nginx: %d leases on %d connections (%d re-used), %d GotConn for 1000 requests, closed by %v",
		r.Leases, r.Opened, r.Reuses, gotConns.Load(), r.ClosedBy)

	c.Close()
	// Every request reached nginx exactly once: count its access log after a
	// graceful stop has flushed it.
	log, err := os.ReadFile(filepath.Join(dir, "access.log"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "\n"); n != 1000 {
		t.Errorf("nginx logged %d requests, want 1000", n)
	}
}
