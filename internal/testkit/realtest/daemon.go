// Package realtest starts real components for tests (nginx here; squid and
// others through Start), on 127.0.0.1 only, and stops them when the test
// ends. A component that is not installed skips the test loudly, except under
// CI=true, where it fails it: .ci/run installs them.
package realtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/testkit/lookpath"
)

// Tool returns the path of the first of names found on PATH or, for an
// absolute name, on disk. When none is there the test is skipped with a loud
// log, or, under CI=true, fails.
func Tool(t testing.TB, what string, names ...string) string {
	t.Helper()
	if p := lookpath.Find(names...); p != "" {
		return p
	}
	Missing(t, what, fmt.Sprintf("looked for %v", names))
	return ""
}

// Missing skips the test loudly because what is not available (why says how
// that was found), or fails it under CI=true.
func Missing(t testing.TB, what, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing (%s) but CI=true: .ci/run must install it", what, why)
	}
	t.Logf("!!! SKIPPING: %s is not available (%s); .ci/run installs it", what, why)
	t.Skipf("%s not available", what)
}

// Dir makes a temporary directory readable by every user, owned by owner when
// the test runs as root and owner is not empty (squid drops root to "proxy"
// and must write there); it is removed at the end of the test.
func Dir(t testing.TB, owner string) string {
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

// LoopbackAddr returns a free "127.0.0.1:port" for a server to bind next: the
// port was just free, and the kernel does not hand a loopback port out again
// that fast.
func LoopbackAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Start runs cmd (a server in its foreground mode) until the test ends, waits
// until addr accepts connections, and stops it at cleanup with SIGTERM (then
// SIGKILL after 10 s). The process's output and the files logs are shown when
// it does not start.
func Start(t testing.TB, cmd *exec.Cmd, addr string, logs ...string) {
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

// Lines waits until the file at path has at least want lines (servers write
// a log line after their response, so a client sees the response first) and
// returns them; after 30 s it returns what there is.
func Lines(t testing.TB, path string, want int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		var lines []string
		if s := strings.TrimRight(string(b), "\n"); s != "" {
			lines = strings.Split(s, "\n")
		}
		if len(lines) >= want || time.Now().After(deadline) {
			return lines
		}
		time.Sleep(20 * time.Millisecond) // polling a file another process writes
	}
}

// lockedBuilder is a strings.Builder a process's output goroutine writes while
// the test may read it.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
