// Package real_test runs connactor against real components that the tests
// start themselves on 127.0.0.1: nginx (HTTP/1.1 keep-alive limits, TLS,
// HTTP/2 and its GOAWAYs), squid (a forward proxy with basic authentication,
// in front of nginx) and headless Chromium (the status page, rendered). They
// go through the exported API only: client's, and conn/h2's for one
// connection on its own.
//
// A missing component skips its tests, loudly, unless CI=true, where it fails
// them: .ci/run installs them all. The unit tests of client and conn/h2 stay
// quick and need nothing installed.
package real_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/connactor/connactor/client"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// protoactor's dead-letter log throttle: a timer goroutine that ends
		// after its period (1s).
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// newClient starts a client for cfg, logging warnings and errors only, and
// closes it at the test's end (after the servers registered before it, since
// cleanups run last-in first-out).
func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitUntil waits for a state the test cannot be told about by an event (the
// pool's counts), polling it; it fails the test after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// countDials wraps the client's TCP dialer to count the sockets it opens (to
// the server, or to the proxy).
func countDials(n *atomic.Int32) func(context.Context, string, string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return d.DialContext(ctx, network, addr)
	}
}
