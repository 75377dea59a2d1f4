package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// The two bodies every server serves: GET /13 and GET /16k.
var (
	body13  = []byte("Hello, World!")
	body16k = bytes.Repeat([]byte("0123456789abcdef"), largeBody/16)
)

// serveEnv marks a child process started to serve (see TestMain: a test binary
// re-executed with -serve cannot parse it as a flag).
const serveEnv = "CONNBENCH_SERVE"

// maxListeners bounds -listeners: one per address 127.0.0.1 .. 127.0.0.250.
const maxListeners = 250

// serveMain is the server process: kind (go|fasthttp) listens on n addresses
// 127.0.0.k:port (k = 1..n, one port: n distinct routes), and, for go when
// certFile is set, with TLS (HTTP/2 and HTTP/1.1) on 127.0.0.1; it prints
// "LISTEN addr ... [TLS addr]" on out, and serves until in reaches EOF (the
// parent closed its end, or died).
func serveMain(kind string, n int, certFile, keyFile string, in io.Reader, out io.Writer) error {
	if len(body13) != smallBody || len(body16k) != largeBody {
		panic("connbench: internal error: body sizes")
	}
	lns, err := listenN(n)
	if err != nil {
		return err
	}
	tlsAddr := ""
	switch kind {
	case serverGo:
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, cl := bodyFor(r.URL.Path)
			if b == nil {
				http.NotFound(w, r)
				return
			}
			hd := w.Header()
			hd["Content-Type"] = textPlain
			hd["Content-Length"] = cl
			if r.URL.Path == pathChurn && r.ProtoMajor == 1 {
				n := r.Context().Value(servedKey{}).(*int)
				if *n++; *n%churnEvery == 0 {
					hd["Connection"] = connClose // the server closes after this response
				}
			}
			w.Write(b)
		})
		srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0),
			// Responses served on the connection (HTTP/1.1: one at a time).
			ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
				return context.WithValue(ctx, servedKey{}, new(int))
			}}
		for _, ln := range lns {
			go srv.Serve(ln) // owned by this process: it exits when the parent closes stdin
		}
		if certFile != "" {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			tlsAddr = ln.Addr().String()
			go srv.ServeTLS(ln, certFile, keyFile) // owned by this process, as above; HTTP/2 by ALPN
		}
	case serverFasthttp:
		srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
			b, _ := bodyFor(string(ctx.Path()))
			if b == nil {
				ctx.SetStatusCode(http.StatusNotFound)
				return
			}
			ctx.SetContentType("text/plain; charset=utf-8")
			ctx.Response.SetBodyRaw(b)
			if string(ctx.Path()) == pathChurn && ctx.ConnRequestNum()%churnEvery == 0 {
				ctx.SetConnectionClose()
			}
		}}
		for _, ln := range lns {
			go srv.Serve(ln) // owned by this process: it exits when the parent closes stdin
		}
	default:
		return fmt.Errorf("unknown server kind %q (want go|fasthttp)", kind)
	}
	addrs := make([]string, len(lns))
	for i, ln := range lns {
		addrs[i] = ln.Addr().String()
	}
	line := "LISTEN " + strings.Join(addrs, " ")
	if tlsAddr != "" {
		line += " TLS " + tlsAddr
	}
	fmt.Fprintln(out, line)
	io.Copy(io.Discard, in)
	return nil
}

// servedKey keys the count of responses a connection of the Go server has
// served (the churn cell's /13c closes every churnEvery-th).
type servedKey struct{}

var connClose = []string{"close"}

var (
	textPlain = []string{"text/plain; charset=utf-8"}
	cl13      = []string{strconv.Itoa(smallBody)}
	cl16k     = []string{strconv.Itoa(largeBody)}
)

func bodyFor(path string) ([]byte, []string) {
	switch path {
	case "/13", pathChurn:
		return body13, cl13
	case "/16k":
		return body16k, cl16k
	}
	return nil, nil
}

// listenN listens on 127.0.0.k:port for k = 1..n, one port for all; it retries
// with another port when one of the addresses has it taken.
func listenN(n int) ([]net.Listener, error) {
	if n < 1 || n > maxListeners {
		return nil, fmt.Errorf("-listeners %d: want 1..%d", n, maxListeners)
	}
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port := first.Addr().(*net.TCPAddr).Port
		lns := []net.Listener{first}
		for k := 2; k <= n; k++ {
			ln, err := net.Listen("tcp", net.JoinHostPort(fmt.Sprintf("127.0.0.%d", k), strconv.Itoa(port)))
			if err != nil {
				lastErr = err
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) == n {
			return lns, nil
		}
		for _, ln := range lns {
			ln.Close()
		}
	}
	return nil, fmt.Errorf("no port free on 127.0.0.1..127.0.0.%d: %w", n, lastErr)
}

// server is a running benchmark server process.
type server struct {
	kind    string
	addrs   []string // 127.0.0.k:port, k = 1..n
	tlsAddr string   // the TLS listener (HTTP/2 and HTTP/1.1), "" = none
	cmd     *exec.Cmd
	exited  chan error // cmd.Wait's result
	stdin   io.Closer  // the -serve child exits when it is closed
	dir     string     // nginx's temp dir
}

// startServer starts a server process of kind with n listeners, and a TLS
// listener when certs is set and the kind speaks HTTP/2 (go, nginx).
func startServer(kind string, n int, nginxBin string, certs *benchCert) (*server, error) {
	if kind == serverNginx {
		return startNginx(nginxBin, n, certs)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-serve", kind, "-listeners", strconv.Itoa(n)}
	if certs != nil && kind == serverGo {
		args = append(args, "-tlscert", certs.certFile, "-tlskey", certs.keyFile)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = childAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{kind: kind, cmd: cmd, stdin: stdin, exited: make(chan error, 1)}
	go func() { s.exited <- cmd.Wait() }() // owned by the child process: ends when it exits
	line := make(chan string, 1)
	go func() { // owned by the child: ends when its stdout closes
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		if sc.Scan() {
			line <- sc.Text()
		} else {
			close(line)
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case l, ok := <-line:
		if !ok || !strings.HasPrefix(l, "LISTEN ") {
			s.stop()
			return nil, fmt.Errorf("%s server did not start (said %q)", kind, l)
		}
		fields, tlsAddr, _ := strings.Cut(strings.TrimPrefix(l, "LISTEN "), " TLS ")
		s.addrs, s.tlsAddr = strings.Fields(fields), tlsAddr
	case <-time.After(30 * time.Second):
		s.stop()
		return nil, fmt.Errorf("%s server did not start in 30s", kind)
	}
	if len(s.addrs) != n {
		s.stop()
		return nil, fmt.Errorf("%s server listens on %d addresses, want %d", kind, len(s.addrs), n)
	}
	return s, nil
}

// startNginx writes a config serving /13 and /16k as static files on n
// addresses 127.0.0.k:port (one worker, keepalive_requests 100000; /13c with
// keepalive_requests 10, the churn cell), and with TLS (listen ... ssl http2:
// Debian's nginx 1.22 has no "http2 on;") on 127.0.0.1 when certs is set, and
// runs nginx in the foreground as a child process.
func startNginx(bin string, n int, certs *benchCert) (*server, error) {
	if n < 1 || n > maxListeners {
		return nil, fmt.Errorf("nginx: %d listeners: want 1..%d", n, maxListeners)
	}
	dir, err := os.MkdirTemp("", "connbench-nginx-")
	if err != nil {
		return nil, err
	}
	www := filepath.Join(dir, "www")
	if err := os.Mkdir(www, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for name, b := range map[string][]byte{"13": body13, "16k": body16k, "13c": body13} {
		if err := os.WriteFile(filepath.Join(www, name), b, 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		s, err := tryNginx(bin, dir, www, n, certs)
		if err == nil {
			return s, nil
		}
		lastErr = err // most likely a port taken meanwhile: try another
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func tryNginx(bin, dir, www string, n int, certs *benchCert) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	tlsServer, tlsAddr := "", ""
	if certs != nil {
		tport, err := freePort()
		if err != nil {
			return nil, err
		}
		tlsAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(tport))
		tlsServer = fmt.Sprintf(`  server {
    listen %s ssl http2;
    ssl_certificate %s;
    ssl_certificate_key %s;
    root %s;
    location / { }
  }
`, tlsAddr, certs.certFile, certs.keyFile, www)
	}
	var listen strings.Builder
	addrs := make([]string, n)
	for k := 1; k <= n; k++ {
		addrs[k-1] = net.JoinHostPort(fmt.Sprintf("127.0.0.%d", k), strconv.Itoa(port))
		fmt.Fprintf(&listen, "    listen %s;\n", addrs[k-1])
	}
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile 16384;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  types { }
  default_type "text/plain; charset=utf-8";
  sendfile on;
  tcp_nodelay on;
  keepalive_requests 100000;
  keepalive_timeout 75s;
  open_file_cache max=16 inactive=60s;
  server {
%[2]s    root %[3]s;
    location / { }
    location = /13c { keepalive_requests %[4]d; }
  }
%[5]s}
`, dir, listen.String(), www, churnEvery, tlsServer)
	confPath := filepath.Join(dir, "nginx.conf")
	errLog := filepath.Join(dir, "error.log")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	os.Remove(errLog)
	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", errLog)
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // owned by the nginx process: ends when it exits
	s := &server{kind: serverNginx, addrs: addrs, tlsAddr: tlsAddr, cmd: cmd, exited: exited, dir: dir}
	deadline := time.Now().Add(10 * time.Second)
	wait := []string{addrs[0], addrs[n-1]}
	if tlsAddr != "" {
		wait = append(wait, tlsAddr)
	}
	for _, a := range wait {
		for {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case werr := <-exited:
				log, _ := os.ReadFile(errLog)
				return nil, fmt.Errorf("nginx exited (%v): %s", werr, bytes.TrimSpace(log))
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				<-exited
				return nil, fmt.Errorf("nginx did not listen on %s in 10s", a)
			}
		}
	}
	return s, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// stop ends the server process and waits for it: the -serve child exits when
// its stdin closes, nginx on SIGTERM (fast shutdown); either is killed after 5s.
func (s *server) stop() {
	if s.stdin != nil {
		s.stdin.Close()
	}
	if s.kind == serverNginx {
		s.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
