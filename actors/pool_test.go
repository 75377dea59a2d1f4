package actors

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/internal/testkit/faultserver"
)

// The Pool's own tests drive it through its API as the client does (Call,
// Lease, Exchange), against real HTTP servers on loopback.

// newTestPool starts a pool with cfg's limits (zero fields get small
// defaults) that the test closes at its end, after the servers registered
// before it.
func newTestPool(t *testing.T, cfg PoolConfig) *Pool {
	t.Helper()
	if cfg.MaxConnsPerRoute == 0 {
		cfg.MaxConnsPerRoute = 8
	}
	if cfg.MaxConnsTotal == 0 {
		cfg.MaxConnsTotal = 64
	}
	if cfg.MaxConcurrentRequests == 0 {
		cfg.MaxConcurrentRequests = 1024
	}
	cfg.DialTimeout = 10 * time.Second
	if cfg.MaxIdleTime == 0 {
		cfg.MaxIdleTime = time.Minute
	}
	if cfg.ExpiryInterval == 0 {
		cfg.ExpiryInterval = time.Second
	}
	cfg.MaxResponseHeaderBytes = 1 << 20
	cfg.ExpectContinueTimeout = time.Second
	cfg.Logger = quiet
	cfg.LoggerFactory = quietFactory
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(t.Context()) })
	return p
}

// roundTrip sends req through p as the client does: admission, lease and
// exchange, replayed as Exchange.Replay allows (without the client's retry
// budget).
func roundTrip(p *Pool, req *http.Request) (*http.Response, error) {
	key, err := p.Key(req, "")
	if err != nil {
		return nil, err
	}
	call := p.NewCall(req, key, nil)
	defer call.Stop()
	if err := call.Admit(); err != nil {
		return nil, err
	}
	fresh, avoid := false, uint64(0)
	for attempt := 0; ; {
		x, err := call.Lease(fresh, avoid)
		if err != nil {
			call.Leave()
			return nil, err
		}
		resp, err := x.RoundTrip(req)
		if err == nil {
			return resp, nil
		}
		next, how := x.Replay(req, err, attempt)
		switch how {
		case NoReplay:
			call.Leave()
			return nil, err
		case LeaseAgain: // no attempt: nothing was written
		default:
			attempt++
			fresh = how == ReplayStale
		}
		req, avoid = next, x.ConnID()
	}
}

// get sends a GET to url through p and returns its body.
func get(t *testing.T, p *Pool, url string) string {
	t.Helper()
	resp, err := roundTrip(p, newGet(t, url))
	if err == nil {
		defer resp.Body.Close()
		var b []byte
		if b, err = io.ReadAll(resp.Body); err == nil {
			return string(b)
		}
	}
	t.Fatalf("GET %s: %v", url, err)
	return ""
}

func newGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// okServer starts a server on loopback that answers every request with a
// 200 (faultserver.OK) and counts its connections; the test closes it.
func okServer(t *testing.T) *faultserver.Server {
	t.Helper()
	srv, err := faultserver.Start(faultserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// waitOpenAtMost waits until srv sees at most n connections open. It learns
// of a close when its read ends, which may be after it accepted the next
// connection.
func waitOpenAtMost(t *testing.T, srv *faultserver.Server, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := srv.Wait(ctx, func(c faultserver.Counts) bool { return c.Open() <= n }); err != nil {
		t.Fatalf("the server sees %d connections open, want at most %d: %v", srv.Counts().Open(), n, err)
	}
}

func quietFactory(*actor.ActorSystem) *slog.Logger { return quiet }

// snapshot takes p's Stats, which must be open.
func snapshot(t *testing.T, p *Pool) Stats {
	t.Helper()
	st, ok := p.Stats()
	if !ok {
		t.Fatal("no stats: the pool is closed")
	}
	return st
}
