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
// the server is another process), allocations per request (runtime.MemStats),
// new connections dialed, and ratios to net/http measured in the same run.
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
)

var allClients = []string{kindNetHTTP, kindConnactor, kindFasthttp, kindStdPool, kindRaw}

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
	maxOther         float64 // re-run a cell when other processes used more CPU (cores); 0 = never
	clients          []string
	servers          []string
	scenarios        []scenario
	nginx            string    // nginx binary ("" = not installed)
	progress         io.Writer // live progress (stderr); nil = none
	live             bool      // progress is a terminal: one \r-updated line
}

func main() {
	fs := flag.NewFlagSet("connbench", flag.ExitOnError)
	serve := fs.String("serve", "", "internal: run the benchmark server of this kind (go|fasthttp) and print its addresses")
	listeners := fs.Int("listeners", 1, "internal: with -serve, how many listeners (127.0.0.k:port)")
	duration := fs.Duration("duration", 3*time.Second, "measured time per cell (server x scenario x client)")
	warmup := fs.Duration("warmup", 500*time.Millisecond, "unmeasured load before each cell")
	count := fs.Int("count", 1, "rounds per scenario (clients interleaved); the run with the median req/s is reported")
	clients := fs.String("clients", strings.Join(allClients, ","), "clients to run, comma-separated: "+strings.Join(allClients, ","))
	scen := fs.String("scenarios", "", "regular expression selecting scenarios by name (empty = all); see -list")
	server := fs.String("server", serverFasthttp, "server: go|fasthttp|nginx|all (all skips nginx when it is not installed)")
	nginxBin := fs.String("nginx", "/usr/sbin/nginx", "nginx binary")
	jsonOut := fs.Bool("json", false, "print JSON instead of the table")
	jsonFile := fs.String("jsonfile", "", "also write the JSON into this file")
	maxOther := fs.Float64("maxother", 0, "on a shared machine: run a cell again (after waiting for quiet) when other processes used more than this many cores during it; 0 = off")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of each cell's measured window into this directory")
	list := fs.Bool("list", false, "list the scenarios and exit")
	fs.Parse(os.Args[1:])

	if *serve != "" {
		if err := serveMain(*serve, *listeners, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "connbench -serve:", err)
			os.Exit(1)
		}
		return
	}
	if *list {
		for _, sc := range defaultScenarios() {
			fmt.Println(sc.describe())
		}
		return
	}
	opt, err := buildOptions(*duration, *warmup, *count, *clients, *scen, *server, *nginxBin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connbench:", err)
		os.Exit(2)
	}
	opt.cpuprofile = *cpuprofile
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
	if err != nil {
		fmt.Fprintln(os.Stderr, "connbench:", err)
		os.Exit(1)
	}
	if rep.failed() {
		os.Exit(1)
	}
}

func buildOptions(duration, warmup time.Duration, count int, clients, scen, server, nginxBin string) (*options, error) {
	opt := &options{duration: duration, warmup: warmup, count: count}
	if duration <= 0 || warmup < 0 || count < 1 {
		return nil, fmt.Errorf("-duration and -count must be positive and -warmup not negative")
	}
	for _, c := range strings.Split(clients, ",") {
		c = strings.TrimSpace(c)
		if !contains(allClients, c) {
			return nil, fmt.Errorf("unknown client %q (want %s)", c, strings.Join(allClients, ","))
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
	for _, sc := range defaultScenarios() {
		if re.MatchString(sc.Name) {
			opt.scenarios = append(opt.scenarios, sc)
		}
	}
	if len(opt.scenarios) == 0 {
		return nil, fmt.Errorf("-scenarios %q matches no scenario (see -list)", scen)
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

// scenario is one load shape. Every client gets the same per-route connection
// limit (Conns) and the same callers.
type scenario struct {
	Name    string
	Callers int // goroutines issuing requests back to back
	Conns   int // connections per route, for every client
	// Total is connactor's MaxConnsTotal and net/http's MaxIdleConns when the
	// scenario has several routes (0 = Conns: one route).
	Total   int
	Routes  int    // distinct host:port targets; each request picks one at random
	Path    string // "/13" or "/16k"
	BodyLen int
}

func (sc scenario) total() int { return max(sc.Total, sc.Conns) }

func (sc scenario) describe() string {
	s := fmt.Sprintf("%-18s %4d callers, %d conns", sc.Name, sc.Callers, sc.Conns)
	if sc.Routes > 1 {
		s += fmt.Sprintf(" per route, %d routes (uniformly random), total limit %d", sc.Routes, sc.total())
	}
	return s + fmt.Sprintf(", %d B body", sc.BodyLen)
}

const (
	smallBody = 13
	largeBody = 16 << 10
)

// defaultScenarios: concurrency 1, 16, 64, 256 x bodies 13 B and 16 KiB with
// min(concurrency, 16) connections; 200 routes with a total limit far below
// their sum (connactor evicts its least recently used idle connection); 1000
// callers on 8 connections.
func defaultScenarios() []scenario {
	var out []scenario
	for _, b := range []struct {
		name string
		path string
		n    int
	}{{"13B", "/13", smallBody}, {"16KiB", "/16k", largeBody}} {
		for _, c := range []int{1, 16, 64, 256} {
			out = append(out, scenario{Name: fmt.Sprintf("c%d/%s", c, b.name), Callers: c, Conns: min(c, 16),
				Routes: 1, Path: b.path, BodyLen: b.n})
		}
	}
	out = append(out,
		scenario{Name: "routes200/13B", Callers: 64, Conns: 4, Total: 64, Routes: 200, Path: "/13", BodyLen: smallBody},
		scenario{Name: "contended1000/13B", Callers: 1000, Conns: 8, Routes: 1, Path: "/13", BodyLen: smallBody},
	)
	return out
}

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
