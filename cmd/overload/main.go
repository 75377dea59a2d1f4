// Command overload measures how clients behave when their upstream is
// overloaded: an in-process HTTP server on 127.0.0.1 serves k requests at a
// time (default 4) for a fixed service time (20 ms) and queues the rest, and
// callers arrive open-loop, each with a deadline (1 s) for its whole
// response. Three phases: twice the server's capacity (12 s); the same load
// while the service time is ten times longer (10 s); then the service time
// back and the load at three quarters of capacity (12 s). Each client runs
// against a server of its own.
//
// It prints, per client and phase: goodput (successes a second, against the
// server's capacity), the p50/p99/p99.9 latency of successes, how many
// callers were refused at once and how fast (p99), the server's queue depth,
// how many answers the server wrote to callers that had already given up,
// and the errors by class. -svg draws goodput, p99 latency and the server's
// queue over time.
//
//	go run ./cmd/overload                       # every client, about 35 s each
//	go run ./cmd/overload -scale 0.25 -clients tuned,fixed
//	make overload                               # and draws docs/bench/overload.svg
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

type options struct {
	k        int
	service  time.Duration
	deadline time.Duration
	scale    float64
	clients  []string
	svg      string
	bucket   time.Duration
}

func parseFlags(args []string) (options, error) {
	var o options
	var list string
	fs := flag.NewFlagSet("overload", flag.ContinueOnError)
	fs.IntVar(&o.k, "k", 4, "requests the server serves at a time")
	fs.DurationVar(&o.service, "service", 20*time.Millisecond, "the server's service time (outside the slowdown)")
	fs.DurationVar(&o.deadline, "deadline", time.Second, "each caller's deadline for its whole response")
	fs.Float64Var(&o.scale, "scale", 1, "multiplies every phase's duration (1: 12 s, 10 s, 12 s)")
	fs.StringVar(&list, "clients", "", "comma-separated clients to run (default all: "+strings.Join(clientKeys(), ",")+")")
	fs.StringVar(&o.svg, "svg", "", "write the chart over time to this file")
	fs.DurationVar(&o.bucket, "bucket", 250*time.Millisecond, "the chart's time resolution")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.k <= 0 || o.service <= 0 || o.deadline <= 0 || o.scale <= 0 || o.bucket <= 0 {
		return o, fmt.Errorf("overload: -k, -service, -deadline, -scale and -bucket must be > 0")
	}
	if list != "" {
		o.clients = strings.Split(list, ",")
		for _, c := range o.clients {
			if !slices.Contains(clientKeys(), c) {
				return o, fmt.Errorf("overload: unknown client %q (known: %s)", c, strings.Join(clientKeys(), ","))
			}
		}
	}
	return o, nil
}

func clientKeys() []string {
	var keys []string
	for _, c := range clients() {
		keys = append(keys, c.key)
	}
	return keys
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := runAll(o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// runAll runs the selected clients one after another and reports.
func runAll(o options, out io.Writer) error {
	sch := defaultSchedule(o.k, o.service, o.scale)
	fmt.Fprintf(out, "server: %d workers, service %v (capacity %.0f/s); deadline %v\n", o.k, o.service, float64(o.k)/o.service.Seconds(), o.deadline)
	for _, p := range sch {
		fmt.Fprintf(out, "  %v\n", p)
	}
	var runs []*run
	for _, spec := range clients() {
		if o.clients != nil && !slices.Contains(o.clients, spec.key) {
			continue
		}
		fmt.Fprintf(out, "running %s ...\n", spec.name)
		r, err := runClient(spec, sch, o.k, o.deadline)
		if err != nil {
			return fmt.Errorf("overload: %s: %w", spec.name, err)
		}
		runs = append(runs, r)
	}
	fmt.Fprintln(out)
	writeReport(out, runs)
	if o.svg != "" {
		if err := os.WriteFile(o.svg, []byte(chart(runs, o.bucket, o.deadline)), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(out, "\nchart: %s\n", o.svg)
	}
	return nil
}
