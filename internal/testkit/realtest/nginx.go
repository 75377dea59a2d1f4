package realtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/connactor/connactor/internal/testkit/proxytest"
)

// NginxConfig says what StartNginx serves.
type NginxConfig struct {
	// TLS serves https with a certificate generated for the test (Nginx.Cert).
	TLS bool
	// HTTP2 turns HTTP/2 on: offered by ALPN with TLS, h2c with prior
	// knowledge without. nginx before 1.25.1 (Debian's is 1.22) has no
	// `http2 on;` and takes `listen ... http2` instead; StartNginx picks by
	// version, and skips (or fails under CI) when the http_v2 module is missing.
	HTTP2 bool
	// HTTP holds directives for the http block (log_format,
	// keepalive_requests, ...). Relative paths are under Nginx.Dir.
	HTTP string
	// Server holds directives for the one server block (locations,
	// access_log, ...); empty means `location / { return 200 "ok"; }`.
	Server string
	// Files are written under Nginx.Dir before nginx starts (name -> content).
	Files map[string]string
}

// Nginx is a running nginx on 127.0.0.1, stopped when the test ends.
type Nginx struct {
	Addr string          // "127.0.0.1:port"
	URL  string          // "http://" or "https://", then Addr
	Cert *proxytest.Cert // the certificate it serves (TLS only); Cert.Pool trusts it
	Dir  string          // its prefix: relative paths in the config are under it
}

// StartNginx runs nginx in the foreground (one process: master_process off,
// so it reads the test's files as the test's user) with a config of its own
// in a temporary directory, on a free loopback port, and waits until it
// accepts connections. Access logs are off unless cfg turns them on; the
// error log is Dir/error.log.
func StartNginx(t testing.TB, cfg NginxConfig) *Nginx {
	t.Helper()
	bin := Tool(t, "nginx", "nginx", "/usr/sbin/nginx")
	n := &Nginx{Addr: LoopbackAddr(t), Dir: Dir(t, "")}
	listen, directives := n.Addr, ""
	if cfg.TLS {
		listen += " ssl"
		n.Cert = proxytest.NewCert()
		files := map[string]string{"cert.pem": string(n.Cert.CertPEM), "key.pem": string(n.Cert.KeyPEM)}
		for name, content := range cfg.Files {
			files[name] = content
		}
		cfg.Files = files
		directives = "ssl_certificate cert.pem;\n    ssl_certificate_key key.pem;\n    "
		n.URL = "https://" + n.Addr
	} else {
		n.URL = "http://" + n.Addr
	}
	if cfg.HTTP2 {
		if NginxHasHTTP2On(t, bin) {
			directives += "http2 on;"
		} else {
			listen += " http2"
		}
	}
	for name, content := range cfg.Files {
		if err := os.WriteFile(filepath.Join(n.Dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	server := cfg.Server
	if server == "" {
		server = `location / { return 200 "ok"; }`
	}
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid nginx.pid;
error_log error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path body;
  proxy_temp_path proxy;
  fastcgi_temp_path fastcgi;
  uwsgi_temp_path uwsgi;
  scgi_temp_path scgi;
  %s
  server {
    listen %s;
    %s
    %s
  }
}
`, cfg.HTTP, listen, directives, server)
	confPath := filepath.Join(n.Dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	errLog := filepath.Join(n.Dir, "error.log")
	Start(t, exec.Command(bin, "-p", n.Dir, "-c", confPath, "-e", errLog), n.Addr, errLog)
	return n
}

// Path returns the path of name under n.Dir (a log the config named).
func (n *Nginx) Path(name string) string { return filepath.Join(n.Dir, name) }

// NginxHasHTTP2On reports whether the nginx at bin takes `http2 on;` (1.25.1
// and later). It skips the test loudly (fails it under CI) when nginx was
// built without the http_v2 module.
func NginxHasHTTP2On(t testing.TB, bin string) bool {
	t.Helper()
	out, err := exec.Command(bin, "-V").CombinedOutput()
	m := regexp.MustCompile(`nginx/(\d+)\.(\d+)\.(\d+)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("%s -V: %q, %v", bin, out, err)
	}
	if !strings.Contains(string(out), "--with-http_v2_module") {
		Missing(t, "nginx's http_v2 module", bin+" -V does not list --with-http_v2_module")
	}
	var v [3]int
	for i := range v {
		v[i], _ = strconv.Atoi(string(m[i+1]))
	}
	for i, want := range [3]int{1, 25, 1} {
		if v[i] != want {
			return v[i] > want
		}
	}
	return true
}
