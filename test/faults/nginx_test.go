package faults_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The pattern of client/nginx_test.go (startNginx, startDaemon), copied: tests
// in another package cannot share it.

const nginxBin = "/usr/sbin/nginx"

// bigPadding is the size of /big's body: enough for the bandwidth toxic to
// matter, small enough to cross it in a fraction of a second.
const bigPadding = 128 << 10

// startNginx runs a real nginx on a free loopback port with a config of its own
// in a temp dir and stops it when the test ends. Its answers name the request
// and nginx's connection serial number ($connection), so a re-used connection
// shows: "req=<id> conn=<n>\n" at /, and the same followed by bigPadding bytes
// at /big. Under CI=true a missing nginx fails the test; elsewhere it skips,
// loudly.
func startNginx(t *testing.T) (addr string) {
	t.Helper()
	if _, err := os.Stat(nginxBin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("nginx is required under CI (.ci/run installs it): %v", err)
		}
		t.Skipf("SKIPPED: %s not found (apt-get install nginx, or run .ci/run); this test runs under CI", nginxBin)
	}
	dir := t.TempDir()
	big := "req=@ID@ conn=@CONN@\n" + strings.Repeat("0123456789abcdef", bigPadding/16)
	if err := os.WriteFile(filepath.Join(dir, "big.html"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
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
	access_log off;
	client_body_temp_path %[2]s/client_body;
	proxy_temp_path %[2]s/proxy;
	fastcgi_temp_path %[2]s/fastcgi;
	uwsgi_temp_path %[2]s/uwsgi;
	scgi_temp_path %[2]s/scgi;
	keepalive_requests 100000;
	server {
		listen %[3]s;
		root %[2]s;
		location = /big {
			default_type text/html;
			sub_filter '@ID@' '$arg_id';
			sub_filter '@CONN@' '$connection';
			sub_filter_once on;
			try_files /big.html =404;
		}
		location / {
			default_type text/plain;
			return 200 "req=$arg_id conn=$connection\n";
		}
	}
}
`, user, dir, addr)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginxBin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	startDaemon(t, cmd, addr, filepath.Join(dir, "error.log"))
	return addr
}

// startDaemon starts cmd, stops it (SIGTERM, then SIGKILL) when the test ends,
// and waits until addr accepts connections.
func startDaemon(t *testing.T, cmd *exec.Cmd, addr string, logs ...string) {
	t.Helper()
	out := &lockedBuilder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", cmd.Path, err)
	}
	exited := make(chan struct{})
	go func() { // owned by the test: waits for the process, which cleanup stops
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
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
		default:
			if time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond) // polling a port a real server opens when it is ready
				continue
			}
		}
		var tail strings.Builder
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			fmt.Fprintf(&tail, "\n--- %s\n%s", l, b)
		}
		t.Fatalf("%s did not start listening on %s: %v\n--- output\n%s%s", cmd.Path, addr, err, out.String(), tail.String())
	}
}

type lockedBuilder struct {
	mu sync.Mutex
	sb strings.Builder
}

func (b *lockedBuilder) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.Write(p)
}

func (b *lockedBuilder) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.String()
}
