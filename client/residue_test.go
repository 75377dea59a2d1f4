//go:build !race

package client

// What routes used once leave behind once they are reclaimed, beside what
// net/http's Transport leaves behind in the same scenario. Each client runs in
// a process of its own (this test binary, run again), started cold: what the
// first wave makes a process pay and keep is counted, as a user's process
// would pay it. Built without the race detector (make test runs it in a
// target of its own, test-residue): a wave of 20,000 routes takes 20 s
// without it, several times that with it.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/testkit/footprint"
)

// residueRoutes is how many routes a wave of TestReclaimedRoutesLeaveNoMoreThanNetHTTP
// has: 20,000, or $CONNACTOR_ROUTES (RELIABILITY.md also has 100,000).
func residueRoutes(t *testing.T) int {
	if os.Getenv("CONNACTOR_ROUTES") == "" {
		return 20_000
	}
	return manyRoutes(t)
}

// residueRun is what one client's process measured: before the first wave,
// right after it, and once the routes of each wave were reclaimed (their
// idle connections closed, for net/http).
type residueRun struct {
	Client       string
	Routes       int
	Wave         time.Duration // how long the first wave took
	Before, Peak footprint.Footprint
	After        [2]footprint.Footprint
}

func (r residueRun) residue(wave int) float64 {
	return (float64(r.After[wave].Heap) - float64(r.Before.Heap)) / 1e6
}

func (r residueRun) String() string {
	mb := func(b uint64) float64 { return float64(b) / 1e6 }
	return fmt.Sprintf("%-9s heap %6.1f MB -> %7.1f MB -> %6.1f MB, after a second wave %6.1f MB (%+.1f and %+.1f MB); %d goroutines after (%d before); first wave %v",
		r.Client, mb(r.Before.Heap), mb(r.Peak.Heap), mb(r.After[0].Heap), mb(r.After[1].Heap),
		r.residue(0), r.residue(1), r.After[1].Goroutines, r.Before.Goroutines, r.Wave.Round(time.Millisecond))
}

// Routes used once each (a crawler's, a webhook sender's): 64 callers send
// one GET to each of 20,000 host names, all dialed to one in-memory server,
// then leave the client alone until every route has been reclaimed (net/http:
// until its idle connections have timed out), twice. Both clients have their
// defaults but for the idle time and the dial (connactor: at most 64
// connections, net/http: at most 100 idle, 2 a host). Once reclaimed, what
// connactor keeps over its start must be within 10% of that start and 2 MB,
// and no more than twice what net/http keeps over its own (each measured in
// a process of its own, from cold); a second wave must add nothing to the
// first's.
func TestReclaimedRoutesLeaveNoMoreThanNetHTTP(t *testing.T) {
	if c := os.Getenv("CONNACTOR_RESIDUE_CLIENT"); c != "" {
		runResidueChild(t, c)
		return
	}
	n := residueRoutes(t)
	// The two processes run at once: each measures only its own heap, and
	// most of a run is waiting for its routes to go.
	runs := map[string]residueRun{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, client := range []string{"net/http", "connactor"} {
		wg.Go(func() {
			r := residueChild(t, client, n)
			mu.Lock()
			runs[client] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	nh, ca := runs["net/http"], runs["connactor"]
	t.Logf("%d routes a wave, used once each by %d callers, each client in a process of its own:\n\t%v\n\t%v", n, waveCallers, nh, ca)
	const mb = 1e6
	limit := (1.1*float64(ca.Before.Heap) + 2*mb) / mb
	if after := float64(ca.After[0].Heap) / mb; after > limit {
		t.Errorf("connactor after the first wave: heap %.1f MB; want at most %.1f MB (the %.1f MB before, 10%% and 2 MB more)",
			after, limit, float64(ca.Before.Heap)/mb)
	}
	// net/http's residue is a few hundred kilobytes, and a heap measured
	// after a collection moves by about as much from run to run: twice it,
	// or a megabyte, whichever is more.
	if most := max(2*nh.residue(0), 1); ca.residue(0) > most {
		t.Errorf("connactor keeps %.1f MB after the first wave; want at most %.1f MB (net/http keeps %.1f MB)", ca.residue(0), most, nh.residue(0))
	}
	// The second wave's routes leave no more than the first's: what is left
	// does not grow with the routes a process has had.
	if grew := ca.residue(1) - ca.residue(0); grew > 0.5 {
		t.Errorf("connactor keeps %.1f MB after the second wave, %.1f MB after the first; want no more (within 0.5 MB)", ca.residue(1), ca.residue(0))
	}
	for _, r := range runs {
		if r.After[0].Goroutines > r.Before.Goroutines || r.After[1].Goroutines > r.Before.Goroutines {
			t.Errorf("%s: goroutines %d before, %d and %d after the waves; want no more after", r.Client, r.Before.Goroutines, r.After[0].Goroutines, r.After[1].Goroutines)
		}
	}
}

// residueChild runs client's waves in a process of its own and returns what
// it measured. It may run on a goroutine of its own: it reports a failure
// with t.Errorf (and a zero run), not t.Fatalf.
func residueChild(t *testing.T, client string, n int) residueRun {
	cmd := exec.Command(os.Args[0], "-test.run=^TestReclaimedRoutesLeaveNoMoreThanNetHTTP$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "CONNACTOR_RESIDUE_CLIENT="+client, fmt.Sprint("CONNACTOR_ROUTES=", n))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s's process: %v\n%s", client, err, out)
		return residueRun{}
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "residue: "); ok {
			var r residueRun
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Errorf("%s's process: %v in %q", client, err, line)
			}
			return r
		}
	}
	t.Errorf("%s's process reported nothing:\n%s", client, out)
	return residueRun{}
}

// runResidueChild is a client's process: it measures itself before the
// first wave, right after it, and once the routes of each of two waves are
// gone, and prints what it measured on a line of its own.
func runResidueChild(t *testing.T, client string) {
	n := residueRoutes(t)
	// 200 µs per route (4 s for 20,000), at least 2 s: about twice as long
	// as a quiet wave takes here, so that most of the wave's routes are
	// there at once when it ends, and short enough that the test spends
	// seconds, not minutes, waiting for them to go.
	idle := max(time.Duration(n)*200*time.Microsecond, 2*time.Second)
	srv, mem := newMemHTTPServer(t, hello)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var (
		rt   http.RoundTripper
		gone func() bool // every route is gone (its connections closed)
		c    *Client
	)
	switch client {
	case "connactor":
		c = newClient(t, Config{MaxIdleTime: idle, Logger: slog.New(slog.DiscardHandler), DialContext: mem.dial})
		rt = c
	case "net/http":
		tr := &http.Transport{DialContext: mem.dial, IdleConnTimeout: idle, MaxIdleConns: 100}
		t.Cleanup(tr.CloseIdleConnections)
		rt = tr
	default:
		t.Fatalf("CONNACTOR_RESIDUE_CLIENT=%q: want connactor or net/http", client)
	}
	r := residueRun{Client: client, Routes: n}
	goroutines := runtime.NumGoroutine()
	if c != nil {
		// The actors are counted, and Stats asked only once they are back,
		// so that what is measured is what the routes leave, not what a
		// Stats call made. Polled while 100,000 routes stopped, a Stats
		// call's array of tickets (one for each route it asked) was still
		// reachable after its routes were gone, 0.8 MB in the heap's
		// profile: the inline places of the mailboxes' queues kept the
		// messages they held when the queues grew out of them, the
		// supervisor's a stopped route's PID or a StatsRequest, the
		// route's a RouteStatsRequest (internal/mailbox clears them now).
		gone = func() bool {
			return footprint.Actors(c.pool.System()) <= r.Before.Actors && len(c.Stats().Routes) == 0
		}
	} else {
		gone = func() bool { return true } // its connections' goroutines tell
	}
	take := func() footprint.Footprint {
		if c != nil {
			return footprint.Take(c.pool.System())
		}
		return footprint.Take(nil)
	}
	r.Before = take()
	for wave := range 2 {
		start := time.Now()
		residueWave(t, rt, port, wave*n, n)
		if wave == 0 {
			r.Wave = time.Since(start)
			r.Peak = take()
		}
		// Polled: no event tells when the last connection's goroutines
		// (the client's and the server's) have returned.
		deadline := time.Now().Add(idle + 2*time.Minute)
		for !gone() || runtime.NumGoroutine() > goroutines {
			if time.Now().After(deadline) {
				t.Fatalf("%s, wave %d: %d goroutines %v after the wave; want %d", client, wave+1, runtime.NumGoroutine(), idle+2*time.Minute, goroutines)
			}
			time.Sleep(10 * time.Millisecond)
		}
		r.After[wave] = take()
		if dir := os.Getenv("CONNACTOR_RESIDUE_PROFILE"); dir != "" {
			writeHeapProfile(t, filepath.Join(dir, fmt.Sprintf("%s-wave%d.pprof", strings.ReplaceAll(client, "/", ""), wave+1)))
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("residue: %s\n", b)
}

// writeHeapProfile writes the heap's profile (what is live, and where it
// was allocated) to path.
func writeHeapProfile(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

// residueWave sends one GET to each of the n routes from r<first+1>.test on,
// waveCallers at a time.
func residueWave(t *testing.T, rt http.RoundTripper, port string, first, n int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range waveCallers {
		wg.Go(func() {
			for i := int(next.Add(1)); i <= n; i = int(next.Add(1)) {
				url := fmt.Sprintf("http://r%d.test:%s/", first+i, port)
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Errorf("%s: %v", url, err)
					return
				}
				// Read to its end, as a user does, so that net/http too
				// keeps the connection (it closes one whose body was not).
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Errorf("%s: %v", url, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
