// Command tail measures what hedged requests and outlier ejection are for,
// on 127.0.0.1 only, and prints a table and draws a chart (SVG) for each
// scenario:
//
//   - tail: a server answers in about 1 ms, except one request in 50, which
//     it holds 200 ms first; 16 closed-loop callers. The latency quantiles,
//     and the requests the server saw against those sent (hedging sends
//     more).
//   - sick: three addresses behind one host name, one answering 503 to
//     every request; 64 callers. The failure rate and each address's share.
//   - spread: the same three addresses over TLS and HTTP/2, all healthy; 64
//     callers. Each address's share of the requests.
//
// Each compares net/http (with a round-robin dialer where there are several
// addresses) with connactor; tail also with connactor hedging at the route's
// p95 (Config.Hedge), sick also with connactor ejecting outliers
// (Config.Outlier).
//
//	go run ./cmd/tail                       # all three, 10 s a client each
//	go run ./cmd/tail -duration 2s -svg docs/bench
//	make tail                               # the same, charts in docs/bench
//
// The sick and spread scenarios need 127.0.0.2 to 127.0.0.4 (Linux routes
// all of 127.0.0.0/8 to loopback).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/connactor/connactor/internal/testkit/loopbacks"
)

func main() {
	var (
		scenarios   = flag.String("scenarios", "tail,sick,spread", "the scenarios to run, comma-separated")
		duration    = flag.Duration("duration", 10*time.Second, "how long each client runs in each scenario")
		tailCallers = flag.Int("tail-callers", 16, "closed-loop callers in the tail scenario")
		callers     = flag.Int("callers", 64, "closed-loop callers in the sick and spread scenarios")
		work        = flag.Duration("work", time.Millisecond, "a healthy answer's service time")
		stall       = flag.Duration("stall", 200*time.Millisecond, "how long a stalled request is held (tail)")
		stallEvery  = flag.Int64("stall-every", 50, "one request in this many stalls (tail)")
		svgDir      = flag.String("svg", "", "write the charts (tail-*.svg) into this directory")
	)
	flag.Parse()
	o := options{scenarios: strings.Split(*scenarios, ","), duration: *duration, tailCallers: *tailCallers,
		callers: *callers, work: *work, stall: *stall, stallEvery: *stallEvery, svgDir: *svgDir}
	if err := run(context.Background(), os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "tail:", err)
		os.Exit(1)
	}
}

// options are the program's settings (its flags).
type options struct {
	scenarios            []string
	duration             time.Duration
	tailCallers, callers int
	work, stall          time.Duration
	stallEvery           int64
	svgDir               string // "" = no charts
}

// run runs the scenarios of o, printing their tables to out.
func run(ctx context.Context, out io.Writer, opt options) error {
	scenarios, duration, tailCallers, callers := opt.scenarios, opt.duration, opt.tailCallers, opt.callers
	work, stall, stallEvery, svgDir := opt.work, opt.stall, opt.stallEvery, opt.svgDir
	for _, s := range scenarios {
		if !slices.Contains([]string{"tail", "sick", "spread"}, s) {
			return fmt.Errorf("unknown scenario %q (tail, sick, spread)", s)
		}
	}
	write := func(name string, c chart) error {
		if svgDir == "" {
			return nil
		}
		return os.WriteFile(filepath.Join(svgDir, name), c.svg(), 0o644)
	}
	for _, s := range scenarios {
		switch s {
		case "tail":
			o := tailOptions{callers: tailCallers, duration: duration, work: work, stall: stall, stallEvery: stallEvery}
			rows, err := runTail(ctx, o, tailClients(tailCallers))
			if err != nil {
				return err
			}
			printTail(out, o, rows)
			if err := write("tail-latency.svg", tailChart(o, rows)); err != nil {
				return err
			}
		case "sick":
			o := endpointOptions{callers: callers, duration: duration, work: work}
			sick := loopbacks.Addr(3)
			addrs, rows, err := runEndpoints(ctx, o, sickHandler(sick, work), false, sickClients(callers))
			if err != nil {
				return err
			}
			title := fmt.Sprintf("Sick endpoint: %s on %d addresses, %v answers, %v answers 503 at once; %d callers, %v"+
				" (connactor: MaxConnsPerRoute %d)", host, len(addrs), work, sick, callers, duration, callers)
			printEndpoints(out, title, addrs, rows)
			c := endpointChart(fmt.Sprintf("One of three addresses answers 503: %d callers", callers), addrs, rows, true,
				map[netip.Addr]string{sick: "(503)"})
			if err := write("tail-sick.svg", c); err != nil {
				return err
			}
		case "spread":
			o := endpointOptions{callers: callers, duration: duration, work: work}
			healthy := sickHandler(netip.Addr{}, work) // no address is sick
			addrs, rows, err := runEndpoints(ctx, o, healthy, true, spreadClients(callers))
			if err != nil {
				return err
			}
			title := fmt.Sprintf("HTTP/2 spread: %s on %d addresses over TLS, %v answers; %d callers, %v, clients' defaults",
				host, len(addrs), work, callers, duration)
			printEndpoints(out, title, addrs, rows)
			c := endpointChart(fmt.Sprintf("HTTP/2 over three addresses: %d callers", callers), addrs, rows, false, nil)
			if err := write("tail-spread.svg", c); err != nil {
				return err
			}
		}
	}
	return nil
}
