// Command connbench measures connactor against net/http's Transport,
// valyala/fasthttp's HostClient, a "pool+std" client (a fixed set of
// connections exchanging with net/http's Request.Write and ReadResponse: a free
// pool on net/http's parsing) and a "raw" client (a fixed set of connections,
// a pre-serialised GET, minimal response parsing: the practical limit), all with
// the same per-host connection limit, on a loopback keep-alive HTTP/1.1 server
// that runs in a separate process: this binary re-executed with -serve (a
// net/http or a fasthttp server), or nginx when it is installed.
//
// Per client and scenario it reports requests/s, p50/p99/p99.9 latency, client
// CPU per request (getrusage of this process: the clients, GC and the harness;
// the server is another process), context switches per request (getrusage)
// and time blocked on locks per request (runtime/metrics), allocations per
// request (runtime.MemStats), new connections dialed, and ratios to net/http
// measured in the same run; then a summary line per cell that reads the
// performance targets as met, not met or not run, each with its figures.
//
// It is a Go module of its own (go.mod beside this file, with a replace of the
// library by ../..), so fasthttp and the comparison clients stay out of the
// library's dependency graph. Run it from its directory:
//
//	cd cmd/connbench
//	go run .                                    # fasthttp server, 3s a cell
//	go run . -server all -json                  # go, fasthttp and nginx; JSON on stdout
//	go run . -scenarios 'c64/13B' -clients nethttp,connactor
//
// See BENCHMARKS.md for a run on this machine class and how to read it.
package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
)

// Client kinds, in the order they run within a scenario (net/http first: the
// others are compared with it).
const (
	kindNetHTTP   = "nethttp"
	kindConnactor = "connactor"
	kindFasthttp  = "fasthttp"
	kindStdPool   = "stdpool"
	kindRaw       = "raw"

	// The HTTP/2 cells' clients, over TLS: net/http's Transport and connactor
	// speaking h2 (ALPN), and connactor speaking HTTP/1.1 over TLS.
	kindNetHTTPH2      = "nethttp-h2"
	kindConnactorH2    = "connactor-h2"
	kindConnactorH1TLS = "connactor-h1tls"

	// connactor with the adaptive limit on (Config.Adaptive at its
	// defaults), its other settings connactor's: what the limit costs a
	// healthy server's cells. Run only when -clients names it.
	kindConnactorAdaptive = "connactor+adaptive"
)

var allClients = []string{kindNetHTTP, kindConnactor, kindFasthttp, kindStdPool, kindRaw}

// optionalClients run in the single-protocol cells only when -clients names
// them: variants of a client, measured beside it.
var optionalClients = []string{kindConnactorAdaptive}

// h2Clients are the clients of the HTTP/2 cells (net/http first: the ratios
// are to it).
var h2Clients = []string{kindNetHTTPH2, kindConnactorH2, kindConnactorH1TLS}

// sweepClients are the clients of the sweeps (CPU per request against routes
// and callers): net/http's curve beside connactor's, and pool+std's against
// callers (it would hold 64 connections to each of 10,000 routes open).
var sweepClients = []string{kindNetHTTP, kindConnactor, kindStdPool}

// Server kinds.
const (
	serverGo       = "go"
	serverFasthttp = "fasthttp"
	serverNginx    = "nginx"
)

// options configure a run.
type options struct {
	duration, warmup time.Duration
	count            int     // rounds per scenario; the median is reported
	cpuprofile       string  // directory for one CPU profile per cell ("" = none)
	svgDir           string  // directory for the sweeps' SVG charts ("" = none)
	maxOther         float64 // re-run a cell when other processes used more CPU (cores); 0 = never
	clients          []string
	servers          []string
	scenarios        []scenario
	nginx            string      // nginx binary ("" = not installed)
	tls              *tls.Config // the HTTP/2 cells' client configuration (set by run)
	progress         io.Writer   // live progress (stderr); nil = none
	live             bool        // progress is a terminal: one \r-updated line
}

func main() {
	fs := flag.NewFlagSet("connbench", flag.ExitOnError)
	serve := fs.String("serve", "", "internal: run the benchmark server of this kind (go|fasthttp) and print its addresses")
	listeners := fs.Int("listeners", 1, "internal: with -serve, how many listeners (127.0.0.k:port)")
	tlsCert := fs.String("tlscert", "", "internal: with -serve go, also serve TLS (HTTP/2) with this certificate file")
	tlsKey := fs.String("tlskey", "", "internal: with -tlscert, its key file")
	duration := fs.Duration("duration", 3*time.Second, "measured time per cell (server x scenario x client)")
	warmup := fs.Duration("warmup", 500*time.Millisecond, "unmeasured load before each cell")
	count := fs.Int("count", 1, "rounds per scenario (clients interleaved); the run with the median req/s is reported")
	clients := fs.String("clients", strings.Join(allClients, ","), "clients of the single-protocol cells, comma-separated: "+strings.Join(allClients, ",")+", and on demand "+strings.Join(optionalClients, ",")+" (HTTP/2 cells: "+strings.Join(h2Clients, ",")+"; sweeps: "+strings.Join(sweepClients, ",")+", those of -clients)")
	scen := fs.String("scenarios", "", "regular expression selecting scenarios by name (empty = all of -groups); see -list")
	groups := fs.String("groups", "main,h2", "scenario groups to run: main (cN, routes200, churn, contended), h2 (HTTP/2 over TLS), sweep (CPU per request and heap per route against routes, CPU per request against callers)")
	svgDir := fs.String("svg", "", "write the sweeps' charts (SVG) into this directory")
	server := fs.String("server", serverFasthttp, "server: go|fasthttp|nginx|all (all skips nginx when it is not installed)")
	nginxBin := fs.String("nginx", "/usr/sbin/nginx", "nginx binary")
	jsonOut := fs.Bool("json", false, "print JSON instead of the table")
	jsonFile := fs.String("jsonfile", "", "also write the JSON into this file")
	maxOther := fs.Float64("maxother", 0, "on a shared machine: run a cell again (after waiting for quiet) when other processes used more than this many cores during it; 0 = off")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of each cell's measured window into this directory")
	list := fs.Bool("list", false, "list the scenarios and exit")
	render := fs.String("render", "", "print the table, summary and (with -svg) charts of a run saved with -jsonfile, and exit")
	fs.Parse(os.Args[1:])
	if *render != "" {
		if err := renderSaved(*render, *svgDir); err != nil {
			fmt.Fprintln(os.Stderr, "connbench -render:", err)
			os.Exit(1)
		}
		return
	}

	if *serve != "" {
		if err := serveMain(*serve, *listeners, *tlsCert, *tlsKey, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "connbench -serve:", err)
			os.Exit(1)
		}
		return
	}
	if *list {
		for _, sc := range allScenarios() {
			fmt.Printf("%-6s %s\n", sc.Group, sc.describe())
		}
		return
	}
	opt, err := buildOptions(*duration, *warmup, *count, *clients, *groups, *scen, *server, *nginxBin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connbench:", err)
		os.Exit(2)
	}
	opt.cpuprofile = *cpuprofile
	opt.svgDir = *svgDir
	opt.maxOther = *maxOther
	opt.progress = os.Stderr
	opt.live = isTerminal(os.Stderr)
	rep, err := run(opt)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connbench:", err)
		os.Exit(1)
	}
	if *jsonFile != "" {
		if f, ferr := os.Create(*jsonFile); ferr != nil {
			err = ferr
		} else {
			err = rep.writeJSON(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "connbench: -jsonfile:", err)
		}
	}
	if *jsonOut {
		err = rep.writeJSON(os.Stdout)
	} else {
		err = rep.writeTable(os.Stdout)
	}
	if err == nil && opt.svgDir != "" {
		err = rep.writeCharts(opt.svgDir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "connbench:", err)
		os.Exit(1)
	}
	if rep.failed() {
		os.Exit(1)
	}
}

// renderSaved prints a saved run (-jsonfile) again, and draws its charts into
// svgDir when set.
func renderSaved(file, svgDir string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return err
	}
	if err := rep.writeTable(os.Stdout); err != nil {
		return err
	}
	if svgDir != "" {
		return rep.writeCharts(svgDir)
	}
	return nil
}

func buildOptions(duration, warmup time.Duration, count int, clients, groups, scen, server, nginxBin string) (*options, error) {
	opt := &options{duration: duration, warmup: warmup, count: count}
	if duration <= 0 || warmup < 0 || count < 1 {
		return nil, fmt.Errorf("-duration and -count must be positive and -warmup not negative")
	}
	for _, c := range strings.Split(clients, ",") {
		c = strings.TrimSpace(c)
		if !contains(allClients, c) && !contains(optionalClients, c) {
			return nil, fmt.Errorf("unknown client %q (want %s)", c, strings.Join(append(allClients, optionalClients...), ","))
		}
		opt.clients = append(opt.clients, c)
	}
	// net/http runs first: the ratios are to it.
	if contains(opt.clients, kindNetHTTP) {
		rest := []string{kindNetHTTP}
		for _, c := range opt.clients {
			if c != kindNetHTTP {
				rest = append(rest, c)
			}
		}
		opt.clients = rest
	}
	re, err := regexp.Compile(scen)
	if err != nil {
		return nil, fmt.Errorf("-scenarios: %w", err)
	}
	want := map[string]bool{}
	for _, g := range strings.Split(groups, ",") {
		g = strings.TrimSpace(g)
		if g != groupMain && g != groupH2 && g != groupSweep {
			return nil, fmt.Errorf("unknown group %q (want main, h2, sweep)", g)
		}
		want[g] = true
	}
	for _, sc := range allScenarios() {
		if want[sc.Group] && re.MatchString(sc.Name) {
			opt.scenarios = append(opt.scenarios, sc)
		}
	}
	if len(opt.scenarios) == 0 {
		return nil, fmt.Errorf("-scenarios %q matches no scenario of -groups %s (see -list)", scen, groups)
	}
	if _, err := os.Stat(nginxBin); err == nil {
		opt.nginx = nginxBin
	}
	switch server {
	case serverGo, serverFasthttp:
		opt.servers = []string{server}
	case serverNginx:
		if opt.nginx == "" {
			return nil, fmt.Errorf("-server nginx: %s not found (apt-get install nginx)", nginxBin)
		}
		opt.servers = []string{server}
	case "all":
		opt.servers = []string{serverGo, serverFasthttp}
		if opt.nginx != "" {
			opt.servers = append(opt.servers, serverNginx)
		} else {
			fmt.Fprintf(os.Stderr, "connbench: %s not found: skipping the nginx server\n", nginxBin)
		}
	default:
		return nil, fmt.Errorf("unknown -server %q (want go|fasthttp|nginx|all)", server)
	}
	return opt, nil
}

// Scenario groups (-groups).
const (
	groupMain  = "main"
	groupH2    = "h2"
	groupSweep = "sweep"
)

// scenario is one load shape. Every client gets the same per-route connection
// limit (Conns) and the same callers.
type scenario struct {
	Name    string
	Group   string // groupMain, groupH2 or groupSweep
	Callers int    // goroutines issuing requests back to back
	Conns   int    // connections per route, for every client
	// Total is connactor's MaxConnsTotal and net/http's MaxIdleConns when the
	// scenario has several routes (0 = Conns: one route).
	Total int
	// OpenTotal, when set, is connactor's MaxConnsTotal instead of Total:
	// routes200open128 gives connactor the bound on open connections that
	// net/http's Transport has in routes200 (MaxIdleConns idle, plus one in
	// use per caller), so that both dial about as often.
	OpenTotal int
	Routes    int    // distinct targets; each request picks one at random
	Path      string // "/13", "/16k", or "/13c" (the server closes every 10th response's connection)
	BodyLen   int

	// Hosts names the routes r1.connbench.test .. rN.connbench.test, all
	// dialed to the server's first address (the sweeps: up to 100,000 routes
	// without a listener each); otherwise route k is the address 127.0.0.k.
	Hosts bool
	// Prime sends one request to each route before the warm-up, so that
	// every route has its connection when the measurement starts.
	Prime bool
	// MinWarmup is the least warm-up of the cell (the primed sweeps: the
	// connections just opened settle into their steady state, idle watches
	// included, before the measurement).
	MinWarmup time.Duration
	// TLS: the cell runs over TLS against the server's TLS listener (the
	// HTTP/2 cells), with the clients h2Clients.
	TLS bool
	// Sweep and X place the cell on a sweep's chart (sweepByRoutes,
	// sweepByCallers).
	Sweep string
	X     int
}

func (sc scenario) total() int { return max(sc.Total, sc.Conns) }

// clients returns the clients that run in sc: the HTTP/2 cells' own, the
// sweeps' (those of -clients among sweepClients), or those of -clients.
func (sc scenario) clients(opt *options) []string {
	switch {
	case sc.TLS:
		return h2Clients
	case sc.Sweep != "":
		var out []string
		for _, c := range opt.clients {
			if contains(sweepClients, c) && (c != kindStdPool || sc.Sweep != sweepByRoutes) {
				out = append(out, c)
			}
		}
		return out
	}
	return opt.clients
}

func (sc scenario) describe() string {
	s := fmt.Sprintf("%-18s %4d callers, %d conns", sc.Name, sc.Callers, sc.Conns)
	if sc.Routes > 1 {
		s += fmt.Sprintf(" per route, %d routes (uniformly random), total limit %d", sc.Routes, sc.total())
		if sc.OpenTotal > 0 {
			s += fmt.Sprintf(" (connactor: %d open)", sc.OpenTotal)
		}
	}
	s += fmt.Sprintf(", %d B body", sc.BodyLen)
	if sc.Path == pathChurn {
		s += ", the server closes every 10th response's connection"
	}
	if sc.TLS {
		s += ", TLS (HTTP/2 and HTTP/1.1)"
	}
	return s
}

const (
	smallBody = 13
	largeBody = 16 << 10
)

// pathChurn is served like /13, but the server closes the connection after
// every 10th response on it (Connection: close): the churn cell.
const pathChurn = "/13c"

// churnEvery is how many responses a connection carries in the churn cell.
const churnEvery = 10

// allScenarios lists every scenario, by group.
//
// main: concurrency 1, 16, 64, 256 x bodies 13 B and 16 KiB with
// min(concurrency, 16) connections; 200 routes with a total limit far below
// their sum (connactor evicts its least recently used idle connection); churn
// (64 callers, 16 connections, a new connection every 10 requests); 1000
// callers on 8 connections.
//
// h2: 1, 64 and 256 callers over TLS (HTTP/2 against HTTP/1.1; Go's and
// nginx's servers).
//
// sweep: CPU per request and heap per route against the number of routes (64
// callers, each request to a random route of 1 .. 100,000, a connection per
// caller allowed on every route, so that no caller waits, within
// sweepMaxOpen) and CPU per request against the number of callers (1 .. 1000
// on one route, min(callers, 16) connections).
func allScenarios() []scenario {
	var out []scenario
	for _, b := range []struct {
		name string
		path string
		n    int
	}{{"13B", "/13", smallBody}, {"16KiB", "/16k", largeBody}} {
		for _, c := range []int{1, 16, 64, 256} {
			out = append(out, scenario{Name: fmt.Sprintf("c%d/%s", c, b.name), Group: groupMain, Callers: c,
				Conns: min(c, 16), Routes: 1, Path: b.path, BodyLen: b.n})
		}
	}
	out = append(out,
		scenario{Name: "routes200/13B", Group: groupMain, Callers: 64, Conns: 4, Total: 64, Routes: 200, Path: "/13", BodyLen: smallBody},
		scenario{Name: "routes200open128/13B", Group: groupMain, Callers: 64, Conns: 4, Total: 64, OpenTotal: 128, Routes: 200,
			Path: "/13", BodyLen: smallBody},
		scenario{Name: "churn/13B", Group: groupMain, Callers: 64, Conns: 16, Routes: 1, Path: pathChurn, BodyLen: smallBody},
		scenario{Name: "contended1000/13B", Group: groupMain, Callers: 1000, Conns: 8, Routes: 1, Path: "/13", BodyLen: smallBody},
	)
	for _, c := range []int{1, 64, 256} {
		out = append(out, scenario{Name: fmt.Sprintf("h2/c%d/13B", c), Group: groupH2, Callers: c, Conns: min(c, 16),
			Routes: 1, Path: "/13", BodyLen: smallBody, TLS: true})
	}
	for _, r := range sweepRoutes {
		out = append(out, scenario{Name: fmt.Sprintf("sweep/routes%d", r), Group: groupSweep, Callers: sweepCallers,
			Conns: sweepCallers, Total: min(r*sweepCallers, sweepMaxOpen), Routes: r, Path: "/13", BodyLen: smallBody,
			Hosts: true, Prime: true, MinWarmup: 2 * time.Second, Sweep: sweepByRoutes, X: r})
	}
	for _, c := range sweepCallersN {
		out = append(out, scenario{Name: fmt.Sprintf("sweep/callers%d", c), Group: groupSweep, Callers: c,
			Conns: min(c, 16), Routes: 1, Path: "/13", BodyLen: smallBody, Sweep: sweepByCallers, X: c})
	}
	return out
}

// The sweeps' points.
var (
	sweepRoutes   = []int{1, 10, 100, 1000, 10_000, 100_000}
	sweepCallersN = []int{1, 4, 16, 64, 256, 1000}
)

// The sweeps (scenario.Sweep).
const (
	sweepByRoutes  = "routes"
	sweepByCallers = "callers"
)

// sweepMaxOpen bounds the connections of the routes sweep (connactor's
// MaxConnsTotal, net/http's MaxIdleConns): the client and the server each
// hold one socket per connection, and a process may have 20,000 descriptors
// here. Up to 10,000 routes it does not bind (a connection per route, and a
// few more for callers that meet on one); at 100,000 routes most requests
// find their route without a connection, and dial after the least recently
// used one is closed.
const sweepMaxOpen = 12_000

// sweepCallers is how many callers the routes sweep runs.
const sweepCallers = 64

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
