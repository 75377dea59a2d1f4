package client

// Integration tests against a real forward proxy (squid, with basic
// authentication) and a real TLS origin (nginx with a certificate generated
// here). .ci/run installs both; elsewhere the tests skip, loudly, when they are
// missing, and under CI=true a missing one fails.

import (
	"context"
	"crypto/md5"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

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

// countDials wraps the client's TCP dialer to count sockets opened (to the proxy).
func countDials(n *atomic.Int32) func(context.Context, string, string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return d.DialContext(ctx, network, addr)
	}
}

func TestSquidWithBasicAuth(t *testing.T) {
	sq := startSquid(t, "alice", "s3cret")
	ng := startNginxTLS(t)

	t.Run("HTTPS through CONNECT reuses one tunnel to nginx", func(t *testing.T) {
		var dials atomic.Int32
		c := newSecureTestClient(t, Config{
			Proxy:       http.ProxyURL(sq.withUser("alice", "s3cret")),
			TLSConfig:   &tls.Config{RootCAs: ng.Cert.Pool},
			DialContext: countDials(&dials),
		})
		for i := 0; i < 5; i++ {
			if body := mustGet(t, context.Background(), c, ng.URL+"/r"+strconv.Itoa(i)); body != "ok" {
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
		cc := &connCounter{}
		origin := countingServer(cc)
		origin.Start()
		defer origin.Close()
		var dials atomic.Int32
		c := newSecureTestClient(t, Config{
			Proxy:       http.ProxyURL(sq.withUser("alice", "s3cret")),
			DialContext: countDials(&dials),
		})
		for i := 0; i < 5; i++ {
			mustGet(t, context.Background(), c, origin.URL+"/?i="+strconv.Itoa(i))
		}
		_, requests, proxyAuth := cc.snapshot()
		if requests != 5 || proxyAuth != 0 || dials.Load() != 1 {
			t.Fatalf("origin saw %d requests, %d with Proxy-Authorization; client dialed squid %d times; want 5, 0, 1",
				requests, proxyAuth, dials.Load())
		}
	})

	t.Run("a wrong password is a 407", func(t *testing.T) {
		c := newSecureTestClient(t, Config{
			Proxy:     http.ProxyURL(sq.withUser("alice", "guess")),
			TLSConfig: &tls.Config{RootCAs: ng.Cert.Pool},
		})
		_, _, err := secureGet(context.Background(), c, ng.URL)
		var pce *ProxyConnectError
		if !errors.As(err, &pce) || pce.StatusCode != http.StatusProxyAuthRequired || strings.Contains(err.Error(), "guess") {
			t.Fatalf("CONNECT with a wrong password: err = %v, want a 407 *ProxyConnectError without the password", err)
		}
		code, _, err := secureGet(context.Background(), c, "http://127.0.0.1:1/")
		if err != nil || code != http.StatusProxyAuthRequired {
			t.Fatalf("plain request with a wrong password: status %d, err %v; want squid's 407 response", code, err)
		}
	})
}
