package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/connactor/connactor/client"
)

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) != "" {
		// startServer re-executed this test binary as the server process.
		fs := flag.NewFlagSet("serve", flag.ExitOnError)
		kind := fs.String("serve", "", "")
		n := fs.Int("listeners", 1, "")
		cert := fs.String("tlscert", "", "")
		key := fs.String("tlskey", "", "")
		fs.Parse(os.Args[1:])
		if err := serveMain(*kind, *n, *cert, *key, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m,
		// net/http's Transport ends its connections' loops asynchronously after
		// CloseIdleConnections.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		// protoactor's dead-letter throttle: a one-shot timer goroutine.
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		// fasthttp's idle-connection cleaners: started per client, they notice
		// that their client has no connection left only after sleeping
		// MaxIdleConnDuration (10s), and then end by themselves.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
	)
}

// TestEveryClientCompletesRequestsWithoutErrorsAgainstTheGoServer runs two
// tiny cells per client against the Go server in its own process: one route,
// and four routes under a total limit of two (connactor must evict).
func TestEveryClientCompletesRequestsWithoutErrorsAgainstTheGoServer(t *testing.T) {
	opt := &options{duration: 200 * time.Millisecond, warmup: 50 * time.Millisecond,
		clients: allClients, servers: []string{serverGo},
		scenarios: []scenario{
			{Name: "c4/13B", Callers: 4, Conns: 4, Routes: 1, Path: "/13", BodyLen: smallBody},
			{Name: "routes4/16KiB", Callers: 4, Conns: 1, Total: 2, Routes: 4, Path: "/16k", BodyLen: largeBody},
		}}
	rep, err := run(opt)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(rep.Results), len(opt.scenarios)*len(allClients); got != want {
		t.Fatalf("%d results, want %d", got, want)
	}
	for _, r := range rep.Results {
		name := r.Scenario + " " + r.Client
		if r.Requests == 0 || r.Errors != 0 {
			t.Errorf("%s: %d requests, %d errors (%s)", name, r.Requests, r.Errors, r.FirstError)
		}
		if r.RPS <= 0 || r.CPUusPerReq <= 0 || r.P50us <= 0 || r.P999us < r.P50us {
			t.Errorf("%s: rps %v, cpu %v us/req, p50 %v us, p99.9 %v us", name, r.RPS, r.CPUusPerReq, r.P50us, r.P999us)
		}
		if r.CtxSwitchesPerReq == nil || *r.CtxSwitchesPerReq < 0 || r.LockWaitUsPerReq == nil || *r.LockWaitUsPerReq < 0 {
			t.Errorf("%s: context switches %v, lock waits %v per request: not measured", name, r.CtxSwitchesPerReq, r.LockWaitUsPerReq)
		}
		if runtime.GOOS == "linux" && r.OtherCores < 0 { // (the server's CPU may round to 0 ticks in 200 ms)
			t.Errorf("%s: other load %v cores: /proc not read", name, r.OtherCores)
		}
		if r.RPSvsNetHTTP == nil || r.CPUvsNetHTTP == nil || *r.RPSvsNetHTTP <= 0 {
			t.Errorf("%s: ratios to net/http not computed", name)
		}
		if r.Client == kindNetHTTP && (*r.RPSvsNetHTTP != 1 || *r.CPUvsNetHTTP != 1) {
			t.Errorf("%s: net/http's ratios to itself are %v, %v", name, *r.RPSvsNetHTTP, *r.CPUvsNetHTTP)
		}
		if r.Client == kindConnactor && r.Routes > 1 && r.Dials <= int64(r.TotalLimit) {
			t.Errorf("%s: %d dials under a total limit of %d on %d routes: no eviction happened", name, r.Dials, r.TotalLimit, r.Routes)
		}
	}

	var table bytes.Buffer
	if err := rep.writeTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"net/http", "connactor", "fasthttp", "pool+std", "raw", "routes4/16KiB", "x net/http",
		"ctxsw/req", "lock us/req"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := rep.writeJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Results) != len(rep.Results) {
		t.Fatalf("JSON does not read back (%v): %s", err, js.String())
	}
}

func TestHistogramQuantilesAreWithinThreePercent(t *testing.T) {
	var h histogram
	for v := int64(1); v <= 100_000; v++ {
		h.record(v * 1000) // 1 us .. 100 ms, uniformly
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		got, want := float64(h.quantile(q)), q*100_000*1000
		if math.Abs(got-want)/want > 0.03 {
			t.Errorf("quantile %v = %v, want %v within 3%%", q, got, want)
		}
	}
	if got := h.mean(); math.Abs(got-50_000.5*1000) > 1 {
		t.Errorf("mean = %v", got)
	}
	for _, v := range []int64{0, 1, 63, 64, 65, 1 << 20, 1 << 40} {
		if got := histValue(histIndex(v)); math.Abs(float64(got-v)) > float64(v)/32+1 {
			t.Errorf("value %d lands in a bucket valued %d", v, got)
		}
	}
}

// TestRawClientRedialsAfterTheServerSaysConnectionClose: the raw client must
// survive a server that closes connections (nginx after keepalive_requests).
func TestRawClientRedialsAfterTheServerSaysConnectionClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 13\r\nConnection: close\r\n\r\nHello, World!")
			c.Close()
		}
	})
	var dials atomic.Int64
	sc := scenario{Callers: 1, Conns: 1, Routes: 1, Path: "/13", BodyLen: smallBody}
	c, err := newRaw(clientSpec{sc: sc, targets: targetsFor(&server{addrs: []string{ln.Addr().String()}}, sc), dials: &dials})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	w := c.newWorker()
	for i := 0; i < 3; i++ {
		if err := w.do(0); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if got := dials.Load(); got != 3 {
		t.Errorf("%d dials for 3 requests on connections the server closes, want 3", got)
	}
}

// TestChurnHTTP2AndSweepCellsRunAgainstTheGoServer runs tiny versions of the
// churn cell (the server closes every 10th response's connection), the HTTP/2
// cells (the h2 clients check every response's protocol), and both sweeps
// (named routes dialed to one address, primed), and draws the charts.
func TestChurnHTTP2AndSweepCellsRunAgainstTheGoServer(t *testing.T) {
	var scs []scenario
	for _, sc := range allScenarios() {
		switch sc.Name {
		case "churn/13B", "h2/c1/13B", "sweep/routes10", "sweep/routes100", "sweep/callers1", "sweep/callers4":
			sc.Callers = min(sc.Callers, 8)
			// Every route has its connection before the window opens: on a
			// loaded machine a first TLS and HTTP/2 handshake can outlast a
			// test cell's 250 ms and leave it with no request. The sweeps'
			// 2 s warm-up lets new connections settle before their figures
			// are taken; this test checks that every cell runs, not figures.
			sc.Prime, sc.MinWarmup = true, 0
			scs = append(scs, sc)
		}
	}
	opt := &options{duration: 200 * time.Millisecond, warmup: 50 * time.Millisecond,
		clients: allClients, servers: []string{serverGo}, scenarios: scs}
	rep, err := run(opt)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rep.Results {
		name := r.Scenario + " " + r.Client
		seen[name] = true
		if r.Requests == 0 || r.Errors != 0 {
			t.Errorf("%s: %d requests, %d errors (%s)", name, r.Requests, r.Errors, r.FirstError)
		}
		if r.Scenario == "churn/13B" && r.Requests > 100 && r.Dials < r.Requests/churnEvery/2 {
			t.Errorf("%s: %d dials for %d requests: the server does not close connections", name, r.Dials, r.Requests)
		}
		if r.Scenario == "sweep/routes100" && r.Client == kindConnactor && r.Dials < 100 {
			t.Errorf("%s: %d dials: the 100 routes were not primed", name, r.Dials)
		}
		if routes := strings.HasPrefix(r.Scenario, "sweep/routes"); routes != (r.HeapPerRoute != 0) {
			t.Errorf("%s: heap per route %.0f B: measured in the routes sweep, and only there", name, r.HeapPerRoute)
		}
	}
	for _, want := range []string{"h2/c1/13B net/http h2", "h2/c1/13B connactor h2", "h2/c1/13B connactor h1/TLS",
		"sweep/routes10 connactor", "sweep/callers4 pool+std"} {
		if !seen[clientKindName(want)] {
			t.Errorf("no result for %s", want)
		}
	}
	var table bytes.Buffer
	if err := rep.writeTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Summary", "churn/13B", "targets: dialing ", "sweep/routes", "connactor h2",
		"heap KB/route by routes: net/http 10: "} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	dir := t.TempDir()
	if err := rep.writeCharts(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cpu-vs-routes-go.svg", "cpu-vs-callers-go.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := xml.Unmarshal(b, new(struct{})); err != nil || !bytes.Contains(b, []byte("<polyline")) {
			t.Errorf("%s is not an SVG line chart (%v)", f, err)
		}
	}
}

// clientKindName turns "scenario client-name" into "scenario client-kind".
func clientKindName(s string) string {
	for kind, name := range clientNames {
		if strings.HasSuffix(s, " "+name) {
			return strings.TrimSuffix(s, name) + kind
		}
	}
	return s
}

// connactor+adaptive is connactor with the routes' adaptive limit on, run
// only when -clients names it.
func TestTheAdaptiveVariantIsConnactorWithItsLimitOnAndRunsOnlyWhenNamed(t *testing.T) {
	opt, err := buildOptions(time.Second, 0, 1, strings.Join(allClients, ","), groupMain, "", serverGo, "")
	if err != nil {
		t.Fatal(err)
	}
	if contains(opt.clients, kindConnactorAdaptive) {
		t.Fatalf("the default clients %v include %s", opt.clients, kindConnactorAdaptive)
	}
	if _, err := buildOptions(time.Second, 0, 1, kindConnactor+","+kindConnactorAdaptive, groupMain, "", serverGo, ""); err != nil {
		t.Fatalf("-clients %s,%s: %v", kindConnactor, kindConnactorAdaptive, err)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, strings.Repeat("x", smallBody))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	spec := clientSpec{sc: scenario{Name: "c1/13B", Callers: 1, Conns: 1, Routes: 1, Path: "/13", BodyLen: smallBody},
		targets: []target{{addr: addr, host: addr, url: srv.URL + "/13", path: "/13"}}, dials: new(atomic.Int64)}
	for _, kind := range []string{kindConnactor, kindConnactorAdaptive} {
		bc, err := newBenchClient(kind, spec)
		if err != nil {
			t.Fatal(err)
		}
		w := bc.newWorker()
		for range 4 {
			if err := w.do(0); err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
		}
		rs := bc.(*stdClient).rt.(*client.Client).Stats().Routes[0]
		bc.close()
		// NoLoad is measured only by an adaptive limit.
		if adaptive := rs.NoLoad > 0; adaptive != (kind == kindConnactorAdaptive) {
			t.Errorf("%s: route's no-load latency %v: adaptive limit on is %v", kind, rs.NoLoad, adaptive)
		}
	}
}
