// Package endpoints_test soaks the client's endpoints through its exported
// API: a rolling restart of the addresses behind one host name under load,
// as a Kubernetes headless service sees on every deployment.
package endpoints_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/internal/testkit/loopbacks"
	"github.com/connactor/connactor/route"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// protoactor's dead-letter log throttle: a timer goroutine that ends
		// after its period (1s).
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// phase is how long each address serves after it replaced another: make
// soak-endpoints runs the full soak (10 s each); make test a short one.
var phase = flag.Duration("endpoints.phase", time.Second, "how long each step of the rolling restart lasts")

const (
	replicas = 5
	callers  = 64
)

// openFDs counts the process's open file descriptors (Linux: /proc/self/fd).
func openFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("SKIPPED: no /proc/self/fd to count descriptors (%v)", err)
	}
	return len(entries)
}

// Five addresses behind svc.test are replaced one at a time under 64 callers,
// each old one leaving the answer, serving on for two lookups (a pod's preStop
// delay), then shutting down gracefully (its dials refused from then, its idle
// connections closed, its requests in flight answered), as a rolling restart
// of a headless service does. No request fails; at the
// end the client holds no connection to an address that left, and the
// process's descriptors are back where they were.
func TestRollingRestartUnderLoadFailsNothing(t *testing.T) {
	if runtime.GOOS != "linux" || !loopbacks.Available() {
		t.Skip("SKIPPED: needs Linux's 127.0.0.0/8 on loopback (127.0.0.2 to 127.0.0.11)")
	}
	old, fresh := loopbacks.Addrs(2, 1+replicas), loopbacks.Addrs(2+replicas, 1+2*replicas)
	baseline := openFDs(t)

	srv, err := loopbacks.Start(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		loopbacks.Options{}, old...)
	if err != nil {
		t.Fatal(err)
	}
	res := &loopbacks.Resolver{}
	res.Set(old...)
	refresh := min(*phase/4, time.Second)
	preStop := 2 * refresh
	c, err := client.New(client.Config{Resolver: res, DNSRefresh: refresh, MaxConnsPerRoute: 16,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://svc.test:%d/", srv.Port())

	var ok, failed atomic.Int64
	var errMu sync.Mutex
	var errs []error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() { // owned by this test: ends on stop
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := c.RoundTrip(mustRequest(url))
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil {
					failed.Add(1)
					errMu.Lock()
					if len(errs) < 10 {
						errs = append(errs, err)
					}
					errMu.Unlock()
					continue
				}
				ok.Add(1)
			}
		})
	}

	start := time.Now()
	live := slices.Clone(old)
	time.Sleep(*phase) // the load runs on the first five
	for i := range replicas {
		if err := srv.Up(fresh[i]); err != nil {
			t.Fatal(err)
		}
		live[i] = fresh[i]
		res.Set(live...)
		// The old one serves on for two lookups (a pod's preStop delay), then
		// shuts down gracefully. Shut down at once, while it is still in the
		// client's answer, a connection the kernel accepted for it just before
		// its listener closed is closed unanswered after the request went out:
		// on a new connection, which neither net/http nor connactor replays (a
		// server may close on a request it refuses), so no client can promise
		// that none fails. Dials refused by an address still in the answer are
		// tested on their own (client's and actors' endpoint tests).
		time.Sleep(preStop)
		ctx, cancel := context.WithTimeout(context.Background(), *phase)
		shut := srv.Shutdown(ctx, old[i])
		cancel()
		if shut != nil && !errors.Is(shut, context.DeadlineExceeded) {
			t.Fatal(shut)
		}
		time.Sleep(*phase - preStop)
	}
	close(stop)
	wg.Wait()
	took := time.Since(start)

	st := c.Stats()
	var eps []route.EndpointStats
	for _, r := range st.Routes {
		eps = append(eps, r.Endpoints...)
	}
	counts := srv.Counts()
	t.Logf("rolling restart of %d addresses, %v each, %d callers, DNSRefresh %v: %d requests in %v (%.0f/s), %d failed; "+
		"%d replays, %d dial failures; closes by reason %v", replicas, *phase, callers, refresh, ok.Load()+failed.Load(),
		took.Round(time.Millisecond), float64(ok.Load())/took.Seconds(), failed.Load(), st.Retries, st.DialFailures, st.Routes[0].ClosedBy)
	for _, e := range eps {
		t.Logf("  endpoint %+v", e)
	}
	for _, a := range append(slices.Clone(old), fresh...) {
		t.Logf("  %v: %d connections accepted, %d requests", a, counts[a].Accepted, counts[a].Requests)
	}
	if failed.Load() > 0 {
		t.Errorf("%d requests failed, want none; the first: %v", failed.Load(), errs)
	}
	for _, e := range eps {
		if slices.Contains(old, e.Addr.Addr()) {
			t.Errorf("the client still has an endpoint at an address that left: %+v", e)
		}
	}
	for _, a := range old {
		if n := counts[a].Open(); n != 0 {
			t.Errorf("%v, gone, has %d connections open", a, n)
		}
	}
	for _, a := range fresh {
		if counts[a].Requests == 0 {
			t.Errorf("%v took no request", a)
		}
	}

	c.Close()
	srv.Close()
	deadline := time.Now().Add(10 * time.Second)
	for openFDs(t) != baseline && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // sockets the kernel has not yet let go of
	}
	if n := openFDs(t); n != baseline {
		t.Errorf("%d descriptors open after the soak, %d before", n, baseline)
	}
}

func mustRequest(url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		panic(err)
	}
	return req
}
