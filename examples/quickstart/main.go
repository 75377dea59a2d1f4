// Command quickstart shows connactor pooling connections for a burst of
// concurrent requests against local servers, under tight limits, and prints what
// the pool did: connections opened and re-used, waits, LRU evictions, and the
// final per-route statistics. It needs no setup and exits by itself.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/connactor/connactor/client"
)

func main() {
	fs := flag.NewFlagSet("quickstart", flag.ExitOnError)
	routes := fs.Int("routes", 4, "local servers (routes) to start")
	requests := fs.Int("requests", 4000, "requests to send")
	callers := fs.Int("callers", 200, "concurrent callers")
	perRoute := fs.Int("per-route", 4, "MaxConnsPerRoute")
	total := fs.Int("total", 10, "MaxConnsTotal (below routes x per-route, so routes compete)")
	fs.Parse(os.Args[1:])
	if err := run(os.Stdout, *routes, *requests, *callers, *perRoute, *total); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run starts the servers, drives the requests and writes the report to out. It
// returns an error if a request failed or a limit was exceeded.
func run(out io.Writer, nRoutes, nRequests, nCallers, perRouteLimit, totalLimit int) error {
	routes, requests, callers, perRoute, total := &nRoutes, &nRequests, &nCallers, &perRouteLimit, &totalLimit

	// Local servers: each counts the connections it accepts, so the limits can
	// be checked from the outside.
	type server struct {
		url              string
		accepted, open   atomic.Int64
		maxOpen, handled atomic.Int64
	}
	servers := make([]*server, *routes)
	for i := range servers {
		s := &server{}
		servers[i] = s
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		s.url = "http://" + ln.Addr().String()
		hs := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s.handled.Add(1)
				time.Sleep(time.Millisecond) // a little work, so callers overlap
				io.WriteString(w, "hello from "+r.Host+"\n")
			}),
			ConnState: func(_ net.Conn, st http.ConnState) {
				switch st {
				case http.StateNew:
					s.accepted.Add(1)
					if o := s.open.Add(1); o > s.maxOpen.Load() {
						s.maxOpen.Store(o)
					}
				case http.StateClosed, http.StateHijacked:
					s.open.Add(-1)
				}
			},
		}
		go hs.Serve(ln) // ended by hs.Close below
		defer hs.Close()
	}

	c, err := client.New(client.Config{
		MaxConnsPerRoute: *perRoute,
		MaxConnsTotal:    *total,
		MaxIdleTime:      30 * time.Second,
		LeaseTimeout:     10 * time.Second,
		Logger:           slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: c, Timeout: 30 * time.Second}

	var reused, fresh, waited, failed atomic.Int64
	var waitSum atomic.Int64
	work := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for g := 0; g < *callers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				var asked time.Time
				trace := &httptrace.ClientTrace{
					GetConn: func(string) { asked = time.Now() },
					GotConn: func(info httptrace.GotConnInfo) {
						if d := time.Since(asked); d > time.Millisecond {
							waited.Add(1)
							waitSum.Add(int64(d))
						}
						if info.Reused {
							reused.Add(1)
						} else {
							fresh.Add(1)
						}
					},
				}
				ctx := httptrace.WithClientTrace(context.Background(), trace)
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, servers[i%len(servers)].url+"/", nil)
				resp, err := hc.Do(req)
				if err != nil {
					failed.Add(1)
					fmt.Fprintln(os.Stderr, "request failed:", err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close() // releases the connection to its route actor
			}
		}()
	}
	for i := 0; i < *requests; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	st := c.Stats()

	fmt.Fprintf(out, "connactor quickstart: %d requests from %d callers to %d local routes in %v (%.0f req/s)\n",
		*requests, *callers, *routes, elapsed.Round(time.Millisecond), float64(*requests)/elapsed.Seconds())
	fmt.Fprintf(out, "limits: MaxConnsPerRoute=%d MaxConnsTotal=%d\n\n", *perRoute, *total)
	fmt.Fprintf(out, "requests ok %d, failed %d\n", int64(*requests)-failed.Load(), failed.Load())
	fmt.Fprintf(out, "connections: %d opened, %d requests on a re-used connection (%.1f%%)\n",
		fresh.Load(), reused.Load(), 100*float64(reused.Load())/float64(max(1, reused.Load()+fresh.Load())))
	avgWait := time.Duration(0)
	if w := waited.Load(); w > 0 {
		avgWait = time.Duration(waitSum.Load() / w)
	}
	fmt.Fprintf(out, "waits: %d requests waited over 1ms for a connection (avg %v)\n", waited.Load(), avgWait.Round(10*time.Microsecond))
	fmt.Fprintf(out, "LRU evictions (an idle connection closed to make room for another route): %d\n\n", st.Evictions)

	sort.Slice(servers, func(i, j int) bool { return servers[i].url < servers[j].url })
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "route\topen\tleased\tidle\tpending\tmax\topened\tclosed\tleases\treuse\tevicted\tserver: accepted\tmax open\t")
	for i, r := range st.Routes {
		s := servers[i]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f%%\t%d\t%d\t%d\t\n",
			r.Route, r.Open, r.Leased, r.Idle, r.Pending, r.Max, r.Opened, r.Closed, r.Leases,
			100*r.ReuseRatio(), r.ClosedBy["lru_eviction"], s.accepted.Load(), s.maxOpen.Load())
	}
	tw.Flush()
	fmt.Fprintf(out, "\ntotal: open %d (limit %d), leased %d, idle %d, pending %d\n", st.Open, st.MaxConnsTotal, st.Leased, st.Idle, st.Pending)

	var problems []string
	if failed.Load() > 0 {
		problems = append(problems, fmt.Sprintf("%d requests failed", failed.Load()))
	}
	if st.Leased != 0 || st.Pending != 0 || st.Open > *total {
		problems = append(problems, fmt.Sprintf("pool not quiet: %+v", st))
	}
	for _, s := range servers {
		if s.maxOpen.Load() > int64(*perRoute) {
			problems = append(problems, fmt.Sprintf("LIMIT EXCEEDED: %s saw %d connections at once", s.url, s.maxOpen.Load()))
		}
	}
	if err := c.Shutdown(context.Background()); err != nil {
		return err
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	fmt.Fprintln(out, "all limits held; pool shut down cleanly")
	return nil
}
