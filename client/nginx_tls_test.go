package client

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/proxytest"
)

// nginxTLS is an nginx serving "ok" over TLS on 127.0.0.1 with a self-signed
// certificate, logging each request's connection serial number and the
// Proxy-Authorization header it carried.
type nginxTLS struct {
	URL  string
	Cert *proxytest.Cert
	log  string
}

func startNginxTLS(t *testing.T) *nginxTLS {
	t.Helper()
	bin := findIntegrationTool(t, "nginx", "nginx", "/usr/sbin/nginx")
	dir := integrationDir(t, "")
	cert := proxytest.NewCert()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, cert.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, cert.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	port := freeLoopbackPort(t)
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
  log_format conns '$connection $connection_requests "$http_proxy_authorization" $request';
  server {
    listen 127.0.0.1:%[2]d ssl;
    ssl_certificate %[3]s;
    ssl_certificate_key %[4]s;
    access_log %[1]s/conns.log conns;
    location / { return 200 "ok"; }
  }
}
`, dir, port, certPath, keyPath)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	startDaemon(t, exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log")),
		addr, filepath.Join(dir, "error.log"))
	return &nginxTLS{URL: "https://" + addr, Cert: cert, log: filepath.Join(dir, "conns.log")}
}

// nginxRequest is one line of nginxTLS's log.
type nginxRequest struct {
	conn, proxyAuth, request string
}

// requests waits until nginx logged n requests (it logs each as it completes)
// and returns them.
func (n *nginxTLS) requests(t *testing.T, want int) []nginxRequest {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f, err := os.Open(n.log)
		var got []nginxRequest
		if err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				// $connection $connection_requests "$http_proxy_authorization" $request
				conn, rest, _ := strings.Cut(sc.Text(), " ")
				_, rest, _ = strings.Cut(rest, " ")
				pa, req, _ := strings.Cut(strings.TrimPrefix(rest, `"`), `" `)
				got = append(got, nginxRequest{conn: conn, proxyAuth: pa, request: req})
			}
			f.Close()
		}
		if len(got) >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond) // nginx writes its log line after the response
	}
}
