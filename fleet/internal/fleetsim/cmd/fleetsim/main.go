// Command fleetsim runs the fleet budget protocol's own code (ledgers, hosts
// and keepers, fleet/internal/protocol) against a simulated clock and network
// (fleet/internal/fleetsim), deterministic from a seed, at N = 10, 100 and
// 1,000 members by R = 100, 1,000 and 10,000 routes, each run through the
// same timeline: Zipf demand that shifts every minute, a rolling restart of a
// tenth of the members, a partition of a tenth for 30 s, the crash of the
// member owning the most shards, etcd down for 15 s, with message delays of
// 1-50 ms and 1% of messages lost throughout. It prints the tables and can
// write them into a Markdown file and draw a chart.
//
//	go run ./fleet/internal/fleetsim/cmd/fleetsim -md FLEET.md -svg docs/bench/fleet-sim.svg   # make fleet-sim
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/connactor/connactor/fleet/internal/fleetsim"
	"github.com/connactor/connactor/fleet/internal/protocol"
)

// cell is one run's size.
type cell struct{ n, r int }

func main() {
	seed := flag.Uint64("seed", 1, "the runs' seed")
	md := flag.String("md", "", "rewrite the tables between the fleetsim markers of this Markdown file")
	svg := flag.String("svg", "", "draw the largest run's utilisation over time into this SVG file")
	workers := flag.Int("p", runtime.GOMAXPROCS(0), "runs at once")
	short := flag.Bool("short", false, "only N = 10 and 100 (seconds, not minutes)")
	only := flag.String("cells", "", "only these sizes, NxR separated by commas (1000x100,100x100); not with -md")
	dur := flag.Duration("d", 0, "simulate this long (default 5m, the whole timeline); not with -md")
	flag.Parse()
	if *dur != 0 && *md != "" {
		fmt.Fprintln(os.Stderr, "fleetsim: -d cuts the timeline the tables show: not with -md")
		os.Exit(2)
	}

	var cells []cell
	for _, n := range []int{10, 100, 1000} {
		if *short && n > 100 {
			continue
		}
		for _, r := range []int{100, 1000, 10000} {
			cells = append(cells, cell{n, r})
		}
	}
	if *only != "" {
		if *md != "" {
			fmt.Fprintln(os.Stderr, "fleetsim: -cells leaves out sizes the tables show: not with -md")
			os.Exit(2)
		}
		cells = cells[:0]
		for _, f := range strings.Split(*only, ",") {
			var c cell
			if _, err := fmt.Sscanf(f, "%dx%d", &c.n, &c.r); err != nil {
				fmt.Fprintf(os.Stderr, "fleetsim: -cells %q: %v\n", f, err)
				os.Exit(2)
			}
			cells = append(cells, c)
		}
	}
	start := time.Now()
	results := run(cells, *seed, *dur, *workers)
	var out bytes.Buffer
	report(&out, cells, results, *seed, time.Since(start))
	os.Stdout.Write(out.Bytes())
	if *md != "" {
		if err := rewrite(*md, out.String()); err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim:", err)
			os.Exit(1)
		}
	}
	if *svg != "" {
		last := results[len(results)-1]
		if err := os.WriteFile(*svg, []byte(chart(last)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim:", err)
			os.Exit(1)
		}
	}
	for _, r := range results {
		if r.MaxOver > 0 {
			fmt.Fprintf(os.Stderr, "fleetsim: N=%d R=%d exceeded the budget by %d\n", r.Config.Members, r.Config.Routes, r.MaxOver)
			os.Exit(1)
		}
	}
}

// run runs the cells, workers at once, the largest first.
func run(cells []cell, seed uint64, dur time.Duration, workers int) []fleetsim.Result {
	results := make([]fleetsim.Result, len(cells))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Go(func() {
			for i := range jobs {
				c := cells[i]
				t := time.Now()
				results[i] = fleetsim.New(fleetsim.Config{Seed: seed, Members: c.n, Routes: c.r, Duration: dur}.Timeline()).Run()
				fmt.Fprintf(os.Stderr, "N=%d R=%d: %v\n", c.n, c.r, time.Since(t).Round(time.Second))
			}
		})
	}
	for i := len(cells) - 1; i >= 0; i-- {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return results
}

func report(w io.Writer, cells []cell, results []fleetsim.Result, seed uint64, took time.Duration) {
	cfg := results[0].Config
	fmt.Fprintf(w, "Seed %d; %d members' callers each (Zipf %.1f over the routes, dealt again every %v); budget max(64, 0.3 N) per route; "+
		"lease %v, etcd session TTL %v, %d shards; messages delayed %v-%v, %.0f%% lost; %v simulated per run; %v on this machine (%s, %d CPUs); "+
		"host CPU from the %s.\n\n",
		seed, cfg.Callers, cfg.Zipf, cfg.Shift, cfg.Lease, cfg.TTL, cfg.Shards, cfg.MinDelay, cfg.MaxDelay, cfg.Loss*100,
		cfg.Duration, took.Round(time.Second), runtime.Version(), runtime.NumCPU(), results[0].CPUClock)

	fmt.Fprintln(w, "| N | R | budget | routes a member uses | worst over the budget | mean use of the fair division | Jain (mean, lowest minute) | messages a member sends and receives /s | per 1,000 routes | renewals a member sends /s | host messages /s (mean, most) | host CPU per request | wait for a first connection after a shift, s (mean, most) |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|---|")
	for i, c := range cells {
		r := results[i]
		fmt.Fprintf(w, "| %d | %d | %d | %.0f | %d | %.1f%% | %.3f, %.3f | %.1f | %.1f | %.1f | %.0f, %.0f | %.1f µs | %.2f, %.2f |\n",
			c.n, c.r, r.Config.Budget, r.RoutesPerMember, r.MaxOver, 100*r.Util, r.Jain, r.JainMin, r.MsgsPerMember,
			r.MsgsPerMember/(float64(c.r)/1000), r.RenewalsPerMember, r.MsgsPerHost, r.MsgsHostMax,
			float64(r.CPUPerRequest.Nanoseconds())/1000, r.WaitMean.Seconds(), r.WaitMax.Seconds())
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Time to converge after each change, seconds (a lease is %v; \"-\" did not converge before the next change):\n\n", protocol.DefaultLease)
	fmt.Fprint(w, "| N | R |")
	for _, ch := range results[0].Changes {
		fmt.Fprintf(w, " %s (%v) |", ch.What, ch.At)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "|---:|---:|")
	for range results[0].Changes {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	for i, c := range cells {
		fmt.Fprintf(w, "| %d | %d |", c.n, c.r)
		for _, ch := range results[i].Changes {
			if ch.Settled {
				fmt.Fprintf(w, " %.2f |", ch.Converge.Seconds())
			} else {
				fmt.Fprint(w, " - |")
			}
		}
		fmt.Fprintln(w)
	}
}

const (
	beginMark = "<!-- fleetsim:begin -->"
	endMark   = "<!-- fleetsim:end -->"
)

// rewrite replaces what lies between the markers of file with tables.
func rewrite(file, tables string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s ... %s markers", file, beginMark, endMark)
	}
	s = s[:i+len(beginMark)] + "\n" + tables + s[j:]
	return os.WriteFile(file, []byte(s), 0o644)
}
