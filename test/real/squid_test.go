package real_test

// Integration tests against a real forward proxy (squid, with basic
// authentication) and a real TLS origin (nginx with a certificate generated
// here).

import (
	"context"
	"crypto/md5"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/connactor/connactor/internal/testkit/calls"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/internal/testkit/proxytest"
	"github.com/connactor/connactor/internal/testkit/realtest"
)

// apr1 is Apache's MD5 password hash ("$apr1$salt$hash"), which squid's
// basic_ncsa_auth accepts in an htpasswd file.
func apr1(password, salt string) string {
	const magic = "$apr1$"
	pw := []byte(password)
	alt := md5.Sum([]byte(password + salt + password))
	h := md5.New()
	h.Write([]byte(password + magic + salt))
	for i := len(pw); i > 0; i -= 16 {
		h.Write(alt[:min(i, 16)])
	}
	for i := len(pw); i > 0; i >>= 1 {
		if i&1 != 0 {
			h.Write([]byte{0})
		} else {
			h.Write(pw[:1])
		}
	}
	f := h.Sum(nil)
	for i := 0; i < 1000; i++ {
		h := md5.New()
		if i&1 != 0 {
			h.Write(pw)
		} else {
			h.Write(f)
		}
		if i%3 != 0 {
			h.Write([]byte(salt))
		}
		if i%7 != 0 {
			h.Write(pw)
		}
		if i&1 != 0 {
			h.Write(f)
		} else {
			h.Write(pw)
		}
		f = h.Sum(nil)
	}
	const itoa64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var out []byte
	to64 := func(v uint32, n int) {
		for ; n > 0; n-- {
			out = append(out, itoa64[v&0x3f])
			v >>= 6
		}
	}
	b := func(i int) uint32 { return uint32(f[i]) }
	to64(b(0)<<16|b(6)<<8|b(12), 4)
	to64(b(1)<<16|b(7)<<8|b(13), 4)
	to64(b(2)<<16|b(8)<<8|b(14), 4)
	to64(b(3)<<16|b(9)<<8|b(15), 4)
	to64(b(4)<<16|b(10)<<8|b(5), 4)
	to64(b(11), 2)
	return magic + salt + "$" + string(out)
}

func TestAPR1MatchesApachesHash(t *testing.T) {
	t.Parallel()
	// Reference values from `openssl passwd -apr1 -salt ...`.
	for _, tc := range []struct{ pw, salt, want string }{
		{"s3cret", "WZH0bxXM", "$apr1$WZH0bxXM$3oXgGB6V1zs.PFHBFGxFs."},
		{"a much longer password than sixteen bytes", "abcdefgh", "$apr1$abcdefgh$Eqv4oIyMsS.tjfvQCJYY1/"},
		{"p", "x1", "$apr1$x1$K3NSuJcBF7sBglVA68wAL0"},
	} {
		if got := apr1(tc.pw, tc.salt); got != tc.want {
			t.Errorf("apr1(%q, %q) = %q, want %q", tc.pw, tc.salt, got, tc.want)
		}
	}
}

// squid is a squid forward proxy on 127.0.0.1 requiring basic authentication.
type squid struct {
	URL *url.URL // without credentials
}

// startSquid starts squid for the test with basic authentication for user,
// checked by basic_ncsa_auth against an htpasswd file written here.
func startSquid(t *testing.T, user, password string) *squid {
	t.Helper()
	bin := realtest.Tool(t, "squid", "squid", "/usr/sbin/squid")
	auth := realtest.Tool(t, "squid's basic_ncsa_auth", "/usr/lib/squid/basic_ncsa_auth", "/usr/lib64/squid/basic_ncsa_auth")
	dir := realtest.Dir(t, "proxy")
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(user+":"+apr1(password, "cOnnAct0")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The helper itself must accept the hash, or every request would be a 407.
	check := exec.Command(auth, htpasswd)
	check.Stdin = strings.NewReader(user + " " + password + "\n")
	if out, err := check.Output(); err != nil || !strings.HasPrefix(string(out), "OK") {
		t.Fatalf("basic_ncsa_auth refuses the generated htpasswd: %q, %v", out, err)
	}
	addr := realtest.LoopbackAddr(t)
	conf := fmt.Sprintf(`http_port %s
auth_param basic program %s %s
auth_param basic realm connactor
acl authed proxy_auth REQUIRED
http_access allow authed
http_access deny all
cache deny all
pid_filename %[4]s/squid.pid
access_log stdio:%[4]s/access.log
cache_log %[4]s/cache.log
cache_store_log none
coredump_dir %[4]s
netdb_filename none
pinger_enable off
shutdown_lifetime 0 seconds
`, addr, auth, htpasswd, dir)
	if os.Geteuid() == 0 {
		conf += "cache_effective_user proxy\n" // the Debian package's user; squid drops root to it
	}
	confPath := filepath.Join(dir, "squid.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	realtest.Start(t, exec.Command(bin, "-f", confPath, "-N", "-d1"), addr, filepath.Join(dir, "cache.log"))
	return &squid{URL: &url.URL{Scheme: "http", Host: addr}}
}

func (s *squid) withUser(user, password string) *url.URL {
	u := *s.URL
	u.User = url.UserPassword(user, password)
	return &u
}

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
	ng := realtest.StartNginx(t, realtest.NginxConfig{
		TLS:    true,
		HTTP:   `log_format conns '$connection $connection_requests "$http_proxy_authorization" $request';`,
		Server: `access_log conns.log conns; location / { return 200 "ok"; }`,
	})
	return &nginxTLS{URL: ng.URL, Cert: ng.Cert, log: ng.Path("conns.log")}
}

// nginxRequest is one line of nginxTLS's log.
type nginxRequest struct {
	conn, proxyAuth, request string
}

// requests waits until nginx logged n requests (it logs each as it completes)
// and returns them.
func (n *nginxTLS) requests(t *testing.T, want int) []nginxRequest {
	t.Helper()
	var got []nginxRequest
	for _, line := range realtest.Lines(t, n.log, want) {
		// $connection $connection_requests "$http_proxy_authorization" $request
		conn, rest, _ := strings.Cut(line, " ")
		_, rest, _ = strings.Cut(rest, " ")
		pa, req, _ := strings.Cut(strings.TrimPrefix(rest, `"`), `" `)
		got = append(got, nginxRequest{conn: conn, proxyAuth: pa, request: req})
	}
	return got
}

// originCounter counts, on a test origin's side, the requests it served and
// the Proxy-Authorization headers they carried.
type originCounter struct {
	mu        sync.Mutex
	requests  int
	proxyAuth int
}

func (oc *originCounter) snapshot() (requests, proxyAuth int) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	return oc.requests, oc.proxyAuth
}

// countingOrigin starts a plain HTTP server answering "ok" that counts into
// oc, closed at the end of the test.
func countingOrigin(t *testing.T, oc *originCounter) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		oc.mu.Lock()
		oc.requests++
		if r.Header.Get("Proxy-Authorization") != "" {
			oc.proxyAuth++
		}
		oc.mu.Unlock()
		io.WriteString(w, "ok")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func TestSquidWithBasicAuth(t *testing.T) {
	t.Parallel()
	sq := startSquid(t, "alice", "s3cret")
	ng := startNginxTLS(t)

	t.Run("HTTPS through CONNECT reuses one tunnel to nginx", func(t *testing.T) {
		var dials atomic.Int32
		c := newClient(t, client.Config{
			Proxy:       http.ProxyURL(sq.withUser("alice", "s3cret")),
			TLSConfig:   &tls.Config{RootCAs: ng.Cert.Pool},
			DialContext: countDials(&dials),
		})
		for i := 0; i < 5; i++ {
			if body := calls.MustGet(t, context.Background(), c, ng.URL+"/r"+strconv.Itoa(i)); body != "ok" {
				t.Fatalf("body %q", body)
			}
		}
		got := ng.requests(t, 5)
		if len(got) != 5 || dials.Load() != 1 {
			t.Fatalf("nginx logged %d requests (%+v); client dialed squid %d times; want 5 and 1", len(got), got, dials.Load())
		}
		for _, r := range got {
			if r.conn != got[0].conn || r.proxyAuth != "-" {
				t.Fatalf("nginx saw %+v: want every request on connection %s and no Proxy-Authorization", got, got[0].conn)
			}
		}
	})

	t.Run("HTTP in absolute-form on one proxy connection", func(t *testing.T) {
		oc := &originCounter{}
		origin := countingOrigin(t, oc)
		var dials atomic.Int32
		c := newClient(t, client.Config{
			Proxy:       http.ProxyURL(sq.withUser("alice", "s3cret")),
			DialContext: countDials(&dials),
		})
		for i := 0; i < 5; i++ {
			calls.MustGet(t, context.Background(), c, origin.URL+"/?i="+strconv.Itoa(i))
		}
		requests, proxyAuth := oc.snapshot()
		if requests != 5 || proxyAuth != 0 || dials.Load() != 1 {
			t.Fatalf("origin saw %d requests, %d with Proxy-Authorization; client dialed squid %d times; want 5, 0, 1",
				requests, proxyAuth, dials.Load())
		}
	})

	t.Run("a wrong password is a 407", func(t *testing.T) {
		c := newClient(t, client.Config{
			Proxy:     http.ProxyURL(sq.withUser("alice", "guess")),
			TLSConfig: &tls.Config{RootCAs: ng.Cert.Pool},
		})
		_, _, err := calls.Get(context.Background(), c, ng.URL)
		var pce *client.ProxyConnectError
		if !errors.As(err, &pce) || pce.StatusCode != http.StatusProxyAuthRequired || strings.Contains(err.Error(), "guess") {
			t.Fatalf("CONNECT with a wrong password: err = %v, want a 407 *ProxyConnectError without the password", err)
		}
		code, _, err := calls.Get(context.Background(), c, "http://127.0.0.1:1/")
		if err != nil || code != http.StatusProxyAuthRequired {
			t.Fatalf("plain request with a wrong password: status %d, err %v; want squid's 407 response", code, err)
		}
	})
}

// Through a real squid (CONNECT, basic authentication) to nginx's HTTP/2
// origin: the client speaks TLS with ALPN inside the tunnel, nginx picks h2,
// and one tunnel carries the streams of every request.
func TestSquidTunnelsHTTP2ToNginxOnOneConnection(t *testing.T) {
	t.Parallel()
	const requests, callers = 500, 32
	sq := startSquid(t, "alice", "s3cret")
	ng := startNginxH2(t, 1000000)
	var dials atomic.Int32
	c := nginxH2Client(t, ng, &dials, client.Config{Proxy: http.ProxyURL(sq.withUser("alice", "s3cret"))})
	if failed := calls.H2Load(t, c, ng.URL, requests, callers, true); failed > 0 {
		t.Fatalf("%d of %d requests through squid failed", failed, requests)
	}
	st := waitSettled(t, c)
	conns := accessLog(t, ng, requests)
	t.Logf("%d requests (half POSTs) from %d callers through squid: %d dials to squid, %d nginx connections, route %s",
		requests, callers, dials.Load(), len(conns), st.Routes[0].Route)
	if dials.Load() != 1 || len(conns) != 1 || st.Open != 1 {
		t.Errorf("%d dials to squid, %d nginx connections, %d open: want one tunnel carrying every stream",
			dials.Load(), len(conns), st.Open)
	}
}
