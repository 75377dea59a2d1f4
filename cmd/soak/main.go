// Command soak runs connactor under a long mixed load and checks the pool's
// invariants all the way through: 1,000,000 requests (by default) over 50
// routes, each a scripted server on its own 127.0.0.1 listener, 20 of them
// reached through toxiproxy v2.12.0 (latency, slicer, bandwidth, and reset_peer
// and timeout toxics switched on and off as it runs). Requests mix good answers
// with every scripted fault of the fault matrix (extra bytes, Content-Length with
// chunked, silent closes, resets, truncations, bad status lines, slowloris,
// stalls), with random cancellation and random early body closes, under a
// MaxConnsTotal well below what the routes could use.
//
// It checks: no desync (every response body names its request), every
// RoundTrip error typed, every clean direct request served, client-side socket
// peaks (counted through Config.DialContext) never above MaxConnsPerRoute and
// MaxConnsTotal, nothing leased or pending and as many sockets as idle
// connections at the end, and descriptors and goroutines back to their
// baseline after Close. It prints a one-screen report and exits 1 when an
// invariant broke.
//
//	go run ./cmd/soak                     # the full soak (make soak)
//	go run ./cmd/soak -duration 20s       # a short one (make test runs it)
//
// Traffic goes to 127.0.0.1 only, and stops by itself.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/connactor/connactor/client"
	fs "github.com/connactor/connactor/internal/testkit/faultserver"
	"github.com/connactor/connactor/internal/testkit/toxi"
)

// responseHeaderTimeout ends the slowloris and stalled requests. It is far
// above what a starved CPU makes of a healthy answer, so that clean requests
// never meet it; /slow's answer takes about 7 s.
const responseHeaderTimeout = 5 * time.Second

// config is the soak's settings (the flags).
type config struct {
	requests       int64
	duration       time.Duration // 0 = until requests are done
	routes         int
	proxied        int // routes through toxiproxy
	callers        int
	maxPerRoute    int
	maxTotal       int
	cancelRate     float64
	earlyCloseRate float64
	seed           uint64
	toxiproxy      string    // "required", "auto" or "off"
	progress       io.Writer // nil: no progress lines
}

// defaults is the full soak's configuration.
func defaults() config {
	return config{requests: 1_000_000, routes: 50, proxied: 20, callers: 128, maxPerRoute: 4, maxTotal: 40,
		cancelRate: 0.02, earlyCloseRate: 0.05, seed: uint64(time.Now().UnixNano()), toxiproxy: "required"}
}

func main() {
	cfg := defaults()
	flag.Int64Var(&cfg.requests, "requests", cfg.requests, "requests to send")
	flag.DurationVar(&cfg.duration, "duration", 0, "stop after this long, even with requests left (0 = no limit)")
	flag.IntVar(&cfg.routes, "routes", cfg.routes, "routes (scripted servers, each on its own listener)")
	flag.IntVar(&cfg.proxied, "proxied", cfg.proxied, "routes reached through toxiproxy")
	flag.IntVar(&cfg.callers, "callers", cfg.callers, "concurrent callers")
	flag.IntVar(&cfg.maxPerRoute, "max-per-route", cfg.maxPerRoute, "MaxConnsPerRoute")
	flag.IntVar(&cfg.maxTotal, "max-total", cfg.maxTotal, "MaxConnsTotal")
	flag.Float64Var(&cfg.cancelRate, "cancel", cfg.cancelRate, "share of requests cancelled at a random moment")
	flag.Float64Var(&cfg.earlyCloseRate, "early-close", cfg.earlyCloseRate, "share of bodies closed after a few bytes")
	flag.Uint64Var(&cfg.seed, "seed", cfg.seed, "random seed")
	flag.StringVar(&cfg.toxiproxy, "toxiproxy", cfg.toxiproxy, "required, auto (use it when installed) or off")
	flag.Parse()
	cfg.progress = os.Stderr
	r, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	r.print(os.Stdout)
	if !r.ok() {
		os.Exit(1)
	}
}

// errNoToxiproxy is returned by run when cfg.toxiproxy is "required" and none
// is installed.
var errNoToxiproxy = errors.New("toxiproxy is required")

// run runs the soak and returns its result; an error means it could not run.
func run(cfg config) (*result, error) {
	res := &result{cfg: cfg, toxiproxy: "off"}
	var tp *toxi.Server
	if cfg.toxiproxy != "off" {
		path, err := toxi.Find()
		switch {
		case err == nil:
			if tp, err = toxi.Start(path); err != nil {
				return nil, err
			}
			defer tp.Close()
			res.toxiproxy = "toxiproxy " + toxi.Version
		case cfg.toxiproxy == "required":
			return nil, fmt.Errorf("%w: %w", errNoToxiproxy, err)
		default:
			res.toxiproxy = "not installed: no proxied routes"
		}
	}
	fl, err := startFleet(cfg.routes, cfg.proxied, tp)
	if err != nil {
		return nil, err
	}
	defer fl.close()
	for _, r := range fl.routes {
		if r.proxy != nil {
			res.proxied++
		}
	}
	closeAPIConns()
	res.base = fs.Measure()

	dialer := fs.NewDialer()
	c, err := client.New(client.Config{
		MaxConnsPerRoute:      cfg.maxPerRoute,
		MaxConnsTotal:         cfg.maxTotal,
		ResponseHeaderTimeout: responseHeaderTimeout,
		DialContext:           dialer.DialContext,
		Logger:                slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	ch := startChaos(fl, cfg.seed)
	l := &load{cfg: cfg, c: c, routes: fl.routes, stop: make(chan struct{})}
	stopProgress := progress(cfg.progress, l, dialer)
	start := time.Now()
	var timer *time.Timer
	if cfg.duration > 0 {
		timer = time.AfterFunc(cfg.duration, func() { close(l.stop) })
	}
	res.tally = l.run()
	res.elapsed = time.Since(start)
	if timer != nil {
		timer.Stop()
	}
	stopProgress()
	res.chaosApplied, res.chaosErrors = ch.stopChaos()
	res.requests = 0
	for _, n := range res.tally.outcomes {
		res.requests += n
	}

	res.atRest, res.rest = settle(c, dialer)
	res.dials = dialer.Counts()
	res.peakTotal = res.dials.Peak
	for addr, p := range dialer.PeakPerAddr() {
		if p > res.peakPerRoute {
			res.peakPerRoute, res.peakRoute = p, addr
		}
	}
	res.evictions = c.Stats().Evictions
	c.Close()
	closeAPIConns()
	res.after, _ = fs.WaitBaseline(res.base, time.Minute)
	return res, nil
}

// closeAPIConns closes the idle keep-alive connections toxiproxy's API client
// (net/http's default transport) holds, so they do not count as the soak's.
func closeAPIConns() {
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

// settle waits (a minute at most) for nothing leased or pending and as many
// open sockets as idle connections, and describes what it found.
func settle(c *client.Client, d *fs.Dialer) (bool, string) {
	r, ok := fs.Settle(func() (int, int, int) { st := c.Stats(); return st.Leased, st.Pending, st.Idle }, d, time.Minute)
	return ok, fmt.Sprintf("%d leased, %d pending, %d sockets open for %d idle", r.Leased, r.Pending, r.Sockets, r.Idle)
}

// progress prints a line every 10 s to w until the returned stop is called.
func progress(w io.Writer, l *load, d *fs.Dialer) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	start := time.Now()
	go func() { // owned by stop, which waits for it
		defer close(ended)
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				n := min(l.issued.Load(), l.cfg.requests)
				dc := d.Counts()
				fmt.Fprintf(w, "soak: %v: %d requests issued, %d sockets open (peak %d), %d dialed\n",
					time.Since(start).Round(time.Second), n, dc.Open, dc.Peak, dc.Dialed)
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}
