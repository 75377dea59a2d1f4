package fleettest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/connactor/connactor/internal/testkit/lookpath"
)

// EtcdNames are where the etcd server binary is looked for: on PATH, and
// where Debian's etcd-server installs it (tests pass them to realtest.Tool).
var EtcdNames = []string{"etcd", "/usr/bin/etcd"}

// EtcdRoot is where the members of a fleet's cluster register in etcd
// (RunMember): a member must use the same root to join them.
const EtcdRoot = "/connactor-fleet"

// EtcdPath returns the etcd server binary (see EtcdNames), or "" when there
// is none.
func EtcdPath() string { return lookpath.Find(EtcdNames...) }

// Etcd is a single-member etcd server on 127.0.0.1 ports, its data in a
// directory of its own.
type Etcd struct {
	cmd      *exec.Cmd
	args     []string
	logw     io.Writer
	endpoint string
	exited   chan struct{}
}

// StartEtcd starts bin with its data under dir, its client and peer URLs on
// free 127.0.0.1 ports, its logs (errors only) to logw, and waits until it
// answers /health, for at most 30 s.
func StartEtcd(bin, dir string, logw io.Writer) (*Etcd, error) {
	var err error
	for range 3 { // a port picked free can be taken before etcd binds it
		var e *Etcd
		if e, err = startEtcd(bin, dir, logw); err == nil {
			return e, nil
		}
	}
	return nil, err
}

func startEtcd(bin, dir string, logw io.Writer) (*Etcd, error) {
	client, err := freePort()
	if err != nil {
		return nil, err
	}
	peer, err := freePort()
	if err != nil {
		return nil, err
	}
	clientURL := "http://127.0.0.1:" + client
	peerURL := "http://127.0.0.1:" + peer
	data, err := os.MkdirTemp(dir, "etcd-")
	if err != nil {
		return nil, err
	}
	e := &Etcd{logw: logw, endpoint: "127.0.0.1:" + client, args: []string{bin,
		"--name", "fleet",
		"--data-dir", filepath.Join(data, "data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "fleet=" + peerURL,
		"--logger", "zap", "--log-level", "error",
	}}
	if err := e.start(); err != nil {
		return nil, err
	}
	return e, nil
}

// start runs etcd with e's arguments and waits until it is healthy.
func (e *Etcd) start() error {
	cmd := exec.Command(e.args[0], e.args[1:]...)
	cmd.Stdout, cmd.Stderr = e.logw, e.logw
	if err := cmd.Start(); err != nil {
		return err
	}
	e.cmd, e.exited = cmd, make(chan struct{})
	exited := e.exited
	go func() { // owned by e: Stop and Kill wait for exited
		_ = cmd.Wait()
		close(exited)
	}()
	if err := e.waitHealthy(30 * time.Second); err != nil {
		_ = e.Stop()
		return err
	}
	return nil
}

// Kill ends etcd with SIGKILL, as a crash does, and waits for it.
func (e *Etcd) Kill() {
	_ = e.cmd.Process.Signal(syscall.SIGKILL)
	<-e.exited
}

// Restart starts etcd again after Kill or Stop, on the same ports and data,
// and waits until it is healthy.
func (e *Etcd) Restart() error { return e.start() }

func (e *Etcd) waitHealthy(within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.endpoint+"/health", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), `"health":"true"`) {
				return nil
			}
		}
		select {
		case <-e.exited:
			return errors.New("fleettest: etcd exited before it was healthy")
		case <-ctx.Done():
			return fmt.Errorf("fleettest: etcd not healthy within %v", within)
		case <-tick.C:
		}
	}
}

// Endpoint is the client endpoint, host:port.
func (e *Etcd) Endpoint() string { return e.endpoint }

// Stop ends etcd (SIGTERM, then SIGKILL after 5 s) and waits for it. It
// does nothing more to an etcd already ended.
func (e *Etcd) Stop() error {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.exited:
	case <-time.After(5 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.exited
	}
	return nil
}

// freePort returns a port on 127.0.0.1 that nothing listens on, below the
// kernel's range of ephemeral ports where it can: a port in that range may
// become the local port of an outgoing connection (a member's etcd client
// retrying, a request to the upstream) while etcd is down, and a restarted
// etcd could then not bind it.
func freePort() (string, error) {
	if low := ephemeralLow(); low > 1024+1000 {
		for range 100 {
			port := strconv.Itoa(1024 + rand.IntN(low-1024))
			if ln, err := net.Listen("tcp", "127.0.0.1:"+port); err == nil {
				ln.Close()
				return port, nil
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

// ephemeralLow is the lowest port the kernel gives outgoing connections, or
// 0 when it cannot be read (not Linux).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	low, _ := strconv.Atoi(f[0])
	return low
}
