package h2

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/errs"
	"github.com/connactor/connactor/internal/proxytest"
)

// A real nginx serving HTTP/2 over TLS on 127.0.0.1, started by the test with a
// certificate made by the test; the helpers follow client/nginx_tls_test.go.

// nginxH2 is a running nginx with HTTP/2 on.
type nginxH2 struct {
	addr string
	cert *proxytest.Cert
	log  string // the access log: "$connection $server_protocol $request"
}

// startNginxH2 starts nginx with `http2 on` (the listen parameter before nginx
// 1.25.1) and keepalive_requests, which makes it send GOAWAY after that many
// requests on a connection. Without nginx the test is skipped loudly, unless
// CI=true, where it fails.
func startNginxH2(t *testing.T, keepaliveRequests int) *nginxH2 {
	t.Helper()
	bin := "/usr/sbin/nginx"
	if _, err := os.Stat(bin); err != nil {
		if p, lerr := exec.LookPath("nginx"); lerr == nil {
			bin = p
		} else if os.Getenv("CI") == "true" {
			t.Fatalf("nginx is missing but CI=true: .ci/run must install it (%v)", err)
		} else {
			t.Logf("!!! SKIPPING: nginx is not installed; .ci/run installs it (apt-get install nginx)")
			t.Skip("nginx not installed")
		}
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cert := proxytest.NewCert()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, cert.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, cert.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	listen, http2On := "ssl http2", ""
	if nginxAtLeast(t, bin, 1, 25, 1) {
		listen, http2On = "ssl", "http2 on;"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nginx binds it next
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  log_format h2 '$connection $server_protocol $request';
  keepalive_requests %[2]d;
  server {
    listen %[3]s %[4]s;
    %[5]s
    ssl_certificate %[6]s;
    ssl_certificate_key %[7]s;
    access_log %[1]s/access.log h2;
    location / { return 200 "ok"; }
  }
}
`, dir, keepaliveRequests, addr, listen, http2On, certPath, keyPath)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { // owned by the test: waits for nginx, which cleanup stops
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(waitTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("nginx exited: %s", out)
		default:
		}
		if time.Now().After(deadline) {
			errLog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx did not listen on %s: %v\n%s\n%s", addr, err, out, errLog)
		}
		time.Sleep(50 * time.Millisecond) // polling a port a real server opens when ready
	}
	return &nginxH2{addr: addr, cert: cert, log: filepath.Join(dir, "access.log")}
}

// nginxAtLeast reports whether `nginx -v` says major.minor.patch or later.
func nginxAtLeast(t *testing.T, bin string, major, minor, patch int) bool {
	out, err := exec.Command(bin, "-v").CombinedOutput()
	m := regexp.MustCompile(`nginx/(\d+)\.(\d+)\.(\d+)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("nginx -v: %q, %v", out, err)
	}
	v := [3]int{}
	for i := range v {
		v[i], _ = strconv.Atoi(string(m[i+1]))
	}
	for i, want := range [3]int{major, minor, patch} {
		if v[i] != want {
			return v[i] > want
		}
	}
	return true
}

// lines waits until the access log has n lines (nginx writes each after its
// response) and returns them.
func (n *nginxH2) lines(t *testing.T, want int) []string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		b, _ := os.ReadFile(n.log)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(b) > 0 && len(lines) >= want || time.Now().After(deadline) {
			return lines
		}
		time.Sleep(20 * time.Millisecond) // nginx logs after the response
	}
}

func TestNginxServesHTTP2AndItsGoAwaysAreRetried(t *testing.T) {
	const requests, perConn = 10, 4
	n := startNginxH2(t, perConn)
	dial := func() (*Conn, *recorder) {
		tc, err := tls.Dial("tcp", n.addr, &tls.Config{RootCAs: n.cert.Pool, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		return newConn(t, tc, Options{}, rec), rec
	}
	first, firstRec := dial()
	cur := first
	dials := 1
	for i := range requests {
		for attempt := 0; ; attempt++ {
			if cur.Streams().Available == 0 { // draining after nginx's GOAWAY
				cur, _ = dial()
				dials++
			}
			_, body, err := get(t, cur, "https://"+n.addr+"/")
			if err == nil {
				if body != "ok" {
					t.Fatalf("request %d: body %q", i, body)
				}
				break
			}
			if !errors.Is(err, errs.ErrNotSent) || attempt > 0 {
				t.Fatalf("request %d, attempt %d: %v", i, attempt, err)
			}
		}
	}

	if got := waitFor(t, firstRec.draining, "Draining of the first connection"); got != ReasonGoAway {
		t.Errorf("first connection: Draining(%q), want goaway", got)
	}
	if got := waitFor(t, firstRec.closed, "Closed of the first connection"); got.reason != ReasonGoAway {
		t.Errorf("first connection: Closed(%q, %v), want goaway", got.reason, got.err)
	}
	lines := n.lines(t, requests)
	conns := map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l) // $connection $server_protocol $request
		if len(f) < 2 || f[1] != "HTTP/2.0" {
			t.Errorf("access log line %q, want HTTP/2.0", l)
			continue
		}
		conns[f[0]] = true
	}
	if len(lines) != requests || len(conns) < requests/perConn+1 || len(conns) != dials {
		t.Errorf("nginx logged %d requests on %d connections, the client dialled %d:\n%s",
			len(lines), len(conns), dials, strings.Join(lines, "\n"))
	}
}
