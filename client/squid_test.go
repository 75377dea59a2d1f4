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
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// findIntegrationTool returns the path of the first of names found on PATH or
// as an absolute path. When none is, the test is skipped with a loud log, or,
// under CI=true, fails: CI installs them (.ci/run).
func findIntegrationTool(t *testing.T, what string, names ...string) string {
	t.Helper()
	for _, n := range names {
		if filepath.IsAbs(n) {
			if _, err := os.Stat(n); err == nil {
				return n
			}
			continue
		}
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing (looked for %v) but CI=true: .ci/run must install it", what, names)
	}
	t.Logf("!!! SKIPPING: %s is not installed (looked for %v); .ci/run installs it (apt-get install squid nginx)", what, names)
	t.Skipf("%s not installed", what)
	return ""
}

// integrationDir makes a temporary directory that a server dropping root
// privileges (squid runs as "proxy") can write to; it is removed at the end.
func integrationDir(t *testing.T, owner string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "connactor-"+owner+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 && owner != "" {
		if u, err := user.Lookup(owner); err == nil {
			uid, _ := strconv.Atoi(u.Uid)
			gid, _ := strconv.Atoi(u.Gid)
			if err := os.Chown(dir, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startDaemon runs cmd (in the foreground mode of its server) until the test
// ends, waits until addr accepts connections, and stops it with SIGTERM (then
// SIGKILL) at cleanup. logs are shown when it fails to start.
func startDaemon(t *testing.T, cmd *exec.Cmd, addr string, logs ...string) {
	t.Helper()
	out := &strings.Builder{}
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
	bin := findIntegrationTool(t, "squid", "squid", "/usr/sbin/squid")
	auth := findIntegrationTool(t, "squid's basic_ncsa_auth", "/usr/lib/squid/basic_ncsa_auth", "/usr/lib64/squid/basic_ncsa_auth")
	dir := integrationDir(t, "proxy")
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
	port := freeLoopbackPort(t)
	conf := fmt.Sprintf(`http_port 127.0.0.1:%d
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
`, port, auth, htpasswd, dir)
	if os.Geteuid() == 0 {
		conf += "cache_effective_user proxy\n" // the Debian package's user; squid drops root to it
	}
	confPath := filepath.Join(dir, "squid.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	startDaemon(t, exec.Command(bin, "-f", confPath, "-N", "-d1"), addr, filepath.Join(dir, "cache.log"))
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
