package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/internal/testkit/benchkit"
)

// tailOptions is the tail scenario's settings.
type tailOptions struct {
	callers    int
	duration   time.Duration
	work       time.Duration // every request's service time
	stall      time.Duration // added to one request in stallEvery
	stallEvery int64
}

// tailRow is one client's line of the tail scenario.
type tailRow struct {
	client        string
	res           result
	seen, stalled int64 // at the server
	hedge         hedgeReading
}

// hedgeReading is what a connactor client's route said of its hedging
// during a run: the hedge delay (RouteStats.HedgeDelay, sampled every
// hedgeSampleEvery while the run lasts; the samples once it was measured,
// sorted), and the hedged attempts and wins at its end.
type hedgeReading struct {
	delays       []time.Duration
	hedges, wins uint64
}

// hedgeSampleEvery is how often a run reads its route's hedge delay.
const hedgeSampleEvery = 100 * time.Millisecond

// tailClients are the clients the tail scenario compares, each built for
// callers closed-loop callers.
func tailClients(callers int) []namedClient {
	return []namedClient{
		{"net/http", func() (http.RoundTripper, func(), error) {
			tr := &http.Transport{MaxIdleConnsPerHost: callers}
			return tr, tr.CloseIdleConnections, nil
		}},
		{"connactor", func() (http.RoundTripper, func(), error) {
			return benchkit.Connactor(client.Config{MaxConnsPerRoute: callers})
		}},
		// Hedged requests at the route's measured p95: the server's "seen"
		// column shows the extra requests they cost. A hedge goes only with
		// room under MaxConnsPerRoute, and each closed-loop caller holds a
		// connection: the route gets room for a hedge per caller.
		{"connactor+hedge", func() (http.RoundTripper, func(), error) {
			return benchkit.Connactor(client.Config{MaxConnsPerRoute: 2 * callers,
				Hedge: &client.HedgePolicy{Percentile: 0.95}})
		}},
	}
}

// namedClient builds a client for a run, and the function that closes it.
type namedClient struct {
	name string
	make func() (http.RoundTripper, func(), error)
}

// runTail runs each client against its own stalling server on 127.0.0.1.
func runTail(ctx context.Context, o tailOptions, clients []namedClient) ([]tailRow, error) {
	var rows []tailRow
	for _, nc := range clients {
		srv := &stallServer{work: o.work, stall: o.stall, stallEvery: o.stallEvery}
		url, stop, err := benchkit.Serve(srv, 0)
		if err != nil {
			return nil, err
		}
		rt, closeClient, err := nc.make()
		if err != nil {
			stop()
			return nil, fmt.Errorf("%s: %w", nc.name, err)
		}
		var res result
		var hr hedgeReading
		if c, ok := rt.(*client.Client); ok {
			hr = sampleHedge(c, func() { res = closedLoop(ctx, rt, url, o.callers, o.duration) })
		} else {
			res = closedLoop(ctx, rt, url, o.callers, o.duration)
		}
		closeClient()
		stop()
		seen, stalled := srv.counts()
		rows = append(rows, tailRow{client: nc.name, res: res, seen: seen, stalled: stalled, hedge: hr})
	}
	return rows, nil
}

// sampleHedge runs load, reading c's hedge delay every hedgeSampleEvery
// until it returns, and then its hedged attempts and wins. c has one route.
func sampleHedge(c *client.Client, load func()) hedgeReading {
	var hr hedgeReading
	read := func() {
		for _, rs := range c.Stats().Routes {
			if rs.HedgeDelay > 0 {
				hr.delays = append(hr.delays, rs.HedgeDelay)
			}
			hr.hedges, hr.wins = rs.Hedges, rs.HedgeWins
		}
	}
	benchkit.SampleWhile(hedgeSampleEvery, read, load)
	read()
	slices.Sort(hr.delays)
	return hr
}

var tailQuantiles = []struct {
	name string
	q    float64
}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"p99.9", 0.999}}

// printTail writes the tail scenario's table.
func printTail(w io.Writer, o tailOptions, rows []tailRow) {
	fmt.Fprintf(w, "\nTail: %d closed-loop callers for %v; the server answers in %v, one request in %d after %v more"+
		" (connactor: MaxConnsPerRoute %d; with Hedge at the route's p95, %d)\n", o.callers, o.duration, o.work,
		o.stallEvery, o.stall, o.callers, 2*o.callers)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "client\tsent\tfailed\t")
	for _, q := range tailQuantiles {
		fmt.Fprintf(tw, "%s\t", q.name)
	}
	fmt.Fprint(tw, "max\tserver saw\tsaw/sent\tstalled\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t", r.client, r.res.requests, r.res.failed())
		for _, q := range tailQuantiles {
			fmt.Fprintf(tw, "%s\t", ms(benchkit.Quantile(r.res.latencies, q.q)))
		}
		var top time.Duration
		if n := len(r.res.latencies); n > 0 {
			top = r.res.latencies[n-1]
		}
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%d\t\n", ms(top), r.seen, ratio(r.seen, int64(r.res.requests)), r.stalled)
	}
	tw.Flush()
	for _, r := range rows {
		printHedge(w, r)
	}
}

// printHedge writes what a hedging client's route said of its hedges, and
// reads the run against the hedge target: p99 <= 5 x p50 + the hedge delay
// (its median over the run), extra requests at the server <= 5 %.
func printHedge(w io.Writer, r tailRow) {
	d := r.hedge.delays
	if len(d) == 0 {
		return
	}
	med := benchkit.Quantile(d, 0.5)
	p50, p99 := benchkit.Quantile(r.res.latencies, 0.5), benchkit.Quantile(r.res.latencies, 0.99)
	bound := 5*p50 + med
	extra := ratio(r.seen, int64(r.res.requests)) - 1
	fmt.Fprintf(w, "%s: hedge delay (the route's Stats every %v) median %s, %s to %s over %d samples; %d hedged attempts, %d won\n",
		r.client, hedgeSampleEvery, ms(med), ms(d[0]), ms(d[len(d)-1]), len(d), r.hedge.hedges, r.hedge.wins)
	fmt.Fprintf(w, "  target p99 <= 5 x p50 + delay: %s <= %s: %s; extra requests at the server <= 5 %%: %.1f %%: %s\n",
		ms(p99), ms(bound), benchkit.Verdict(p99 <= bound), 100*extra, benchkit.Verdict(extra <= 0.05))
}

// tailChart is the tail scenario's chart: each quantile's latency by client.
func tailChart(o tailOptions, rows []tailRow) chart {
	c := chart{title: fmt.Sprintf("Tail latency: %d callers, %v answers, 1 in %d stalls %v", o.callers, o.work, o.stallEvery, o.stall),
		unit: " ms", log: true}
	for _, r := range rows {
		c.series = append(c.series, r.client)
	}
	for _, q := range tailQuantiles {
		g := group{label: q.name}
		for _, r := range rows {
			v := math.NaN()
			if len(r.res.latencies) > 0 {
				v = float64(benchkit.Quantile(r.res.latencies, q.q)) / float64(time.Millisecond)
			}
			g.values = append(g.values, v)
		}
		c.groups = append(c.groups, g)
	}
	return c
}

// ms prints d in milliseconds.
func ms(d time.Duration) string { return benchkit.Millis(d, 2) }

// ratio is a/b, 0 when b is.
func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
