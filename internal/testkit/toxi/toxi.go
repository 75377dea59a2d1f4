// Package toxi starts a toxiproxy server (Shopify's toxiproxy v2.12.0, a
// separate process) on 127.0.0.1 for tests and soaks, and drives it through
// toxiproxy's own Go client: proxies listen on free loopback ports and forward
// to loopback upstreams; toxics (latency, bandwidth, slicer, reset_peer,
// timeout, ...) are added and removed through the client.
//
// The binary is found through $TOXIPROXY_SERVER, then toxiproxy-server on PATH,
// then $GOPATH/bin/toxiproxy-server (.ci/run installs it there with go install).
package toxi

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// Version is the toxiproxy release the tests are written against.
const Version = "v2.12.0"

// ErrNotInstalled is returned by Find when no toxiproxy-server binary is found,
// or the one found is not Version.
var ErrNotInstalled = errors.New("toxi: toxiproxy-server " + Version + " not found (set TOXIPROXY_SERVER, or run .ci/run)")

// Find returns the path of the toxiproxy-server binary, or an error wrapping
// ErrNotInstalled. It checks the binary's Go module version (a go-installed
// server's -version flag only says "git").
func Find() (string, error) {
	var candidates []string
	if p := os.Getenv("TOXIPROXY_SERVER"); p != "" {
		candidates = append(candidates, p)
	} else {
		if p, err := exec.LookPath("toxiproxy-server"); err == nil {
			candidates = append(candidates, p)
		}
		candidates = append(candidates, filepath.Join(build.Default.GOPATH, "bin", "toxiproxy-server"))
	}
	var errs []error
	for _, p := range candidates {
		info, err := buildinfo.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if info.Main.Path != "github.com/Shopify/toxiproxy/v2" || info.Main.Version != Version {
			errs = append(errs, fmt.Errorf("%s is %s %s", p, info.Main.Path, info.Main.Version))
			continue
		}
		return p, nil
	}
	return "", fmt.Errorf("%w: %w", ErrNotInstalled, errors.Join(errs...))
}

// Server is a running toxiproxy server. Its embedded Client is toxiproxy's own
// API client, bound to it.
type Server struct {
	*toxiproxy.Client
	Addr string // the API's 127.0.0.1:port

	cmd    *exec.Cmd
	exited chan struct{}
	out    *lockedBuffer
	names  int
	mu     sync.Mutex
}

// Start runs the binary at path with its API on a free port of 127.0.0.1 and
// returns once the API answers (within 20 s). Close stops it.
func Start(path string) (*Server, error) {
	var err error
	for attempt := 0; attempt < 3; attempt++ { // a free port can be taken before the server binds it
		var s *Server
		if s, err = start(path); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func start(path string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close() // the server binds it next
	host, port, _ := net.SplitHostPort(addr)
	s := &Server{Addr: addr, out: &lockedBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(path, "-host", host, "-port", port)
	s.cmd.Env = append(os.Environ(), "LOG_LEVEL=warn")
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("toxi: %w", err)
	}
	go func() { // owned by the Server: Close waits for it
		s.cmd.Wait()
		close(s.exited)
	}()
	s.Client = toxiproxy.NewClient(addr)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := s.Version(); err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("toxi: toxiproxy-server exited before answering on %s: %s", addr, s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("toxi: toxiproxy-server did not answer on %s: %s", addr, s.out.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a port a separate process opens when it is ready
	}
}

// Proxy creates a proxy to upstream (host:port) listening on a free port of
// 127.0.0.1; its Listen field holds that address. The name is made unique.
func (s *Server) Proxy(name, upstream string) (*toxiproxy.Proxy, error) {
	s.mu.Lock()
	s.names++
	name = fmt.Sprintf("%s-%d", name, s.names)
	s.mu.Unlock()
	p, err := s.CreateProxy(name, "127.0.0.1:0", upstream)
	if err != nil {
		return nil, fmt.Errorf("toxi: proxy %s: %w", name, err)
	}
	return p, nil
}

// Output is what the server printed so far (warnings and errors).
func (s *Server) Output() string { return s.out.String() }

// Close stops the server (SIGTERM, then SIGKILL after 10 s) and waits for it.
// It also closes the idle API connections of net/http's default transport,
// which toxiproxy's client uses, so they do not outlive the server.
func (s *Server) Close() error {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	return nil
}

// lockedBuffer collects a process's output; the os/exec copier writes while
// tests read.
type lockedBuffer struct {
	mu sync.Mutex
	sb strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.String()
}
