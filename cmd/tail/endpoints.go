package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/internal/testkit/benchkit"
	"github.com/connactor/connactor/internal/testkit/faultserver"
	"github.com/connactor/connactor/internal/testkit/loopbacks"
)

// The two scenarios with several addresses behind one host name: three
// servers on 127.0.0.2, 127.0.0.3 and 127.0.0.4 (one port), which a
// resolver gives connactor for svc.test and a round-robin dialer gives
// net/http.

// host is the name the addresses stand behind.
const host = "svc.test"

// endpointOptions is the settings of the scenarios with several addresses.
type endpointOptions struct {
	callers  int
	duration time.Duration
	work     time.Duration // a healthy answer's service time
}

// endpointRow is one client's line: its result and each address's share.
type endpointRow struct {
	client string
	res    result
	share  []addrCount // in the order of the addresses
}

// addrCount is one address's requests and connections during a run.
type addrCount struct {
	addr     netip.Addr
	requests int
	conns    int // accepted
}

// shares returns each address's requests and connections between two
// snapshots of the servers' counts.
func shares(addrs []netip.Addr, before, after map[netip.Addr]loopbacks.Counts) []addrCount {
	out := make([]addrCount, len(addrs))
	for i, a := range addrs {
		out[i] = addrCount{addr: a, requests: after[a].Requests - before[a].Requests,
			conns: after[a].Accepted - before[a].Accepted}
	}
	return out
}

// percentOf returns each address's share of the requests, in percent.
func percentOf(cs []addrCount) []float64 {
	total := 0
	for _, c := range cs {
		total += c.requests
	}
	out := make([]float64, len(cs))
	for i, c := range cs {
		if total > 0 {
			out[i] = 100 * float64(c.requests) / float64(total)
		}
	}
	return out
}

// endpointClient builds a client for the addresses' run: rr for net/http,
// res for connactor; tlsCfg nil for plain HTTP.
type endpointClient struct {
	name string
	make func(rr *roundRobin, res *loopbacks.Resolver, tlsCfg *tls.Config) (http.RoundTripper, func(), error)
}

func netHTTPRoundRobin(callers int) endpointClient {
	return endpointClient{"net/http (round-robin dialer)", func(rr *roundRobin, _ *loopbacks.Resolver, tlsCfg *tls.Config) (http.RoundTripper, func(), error) {
		tr := &http.Transport{DialContext: rr.DialContext, MaxIdleConnsPerHost: callers, TLSClientConfig: tlsCfg,
			ForceAttemptHTTP2: tlsCfg != nil}
		return tr, tr.CloseIdleConnections, nil
	}}
}

func connactorResolved(name string, cfg client.Config) endpointClient {
	return endpointClient{name, func(_ *roundRobin, res *loopbacks.Resolver, tlsCfg *tls.Config) (http.RoundTripper, func(), error) {
		cfg := cfg
		cfg.Resolver, cfg.TLSConfig = res, tlsCfg
		return benchkit.Connactor(cfg)
	}}
}

// sickClients are the clients of the sick-endpoint scenario: net/http,
// connactor as it comes, and connactor ejecting outliers (Config.Outlier,
// its defaults: five failed exchanges in a row eject an address).
func sickClients(callers int) []endpointClient {
	return []endpointClient{
		netHTTPRoundRobin(callers),
		connactorResolved("connactor", client.Config{MaxConnsPerRoute: callers}),
		connactorResolved("connactor+outlier", client.Config{MaxConnsPerRoute: callers,
			Outlier: &client.OutlierPolicy{}}),
	}
}

// spreadClients are the clients of the HTTP/2 spread scenario, each with
// its defaults but for the round-robin dialer: net/http keeps one HTTP/2
// connection per host, to the address its first dial reached; connactor
// keeps one per address as load needs them, and sends each stream to the
// connection with the fewest in flight.
func spreadClients(callers int) []endpointClient {
	return []endpointClient{
		netHTTPRoundRobin(callers),
		connactorResolved("connactor", client.Config{}),
	}
}

// runEndpoints serves h on three loopback addresses (TLS with HTTP/2 when
// withTLS), and runs each client against svc.test on them.
func runEndpoints(ctx context.Context, o endpointOptions, h http.Handler, withTLS bool, clients []endpointClient) ([]netip.Addr, []endpointRow, error) {
	if !loopbacks.Available() {
		return nil, nil, fmt.Errorf("this machine cannot listen on 127.0.0.2 (Linux routes 127.0.0.0/8 to loopback; elsewhere add the addresses)")
	}
	addrs := loopbacks.Addrs(2, 4)
	var opt loopbacks.Options
	var clientTLS *tls.Config
	scheme := "http"
	if withTLS {
		cert, err := faultserver.NewCert(faultserver.CertSpec{DNSNames: []string{host},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)})
		if err != nil {
			return nil, nil, err
		}
		opt.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
		clientTLS = &tls.Config{RootCAs: cert.Pool}
		scheme = "https"
	}
	srv, err := loopbacks.Start(h, opt, addrs...)
	if err != nil {
		return nil, nil, err
	}
	defer srv.Close()
	url := fmt.Sprintf("%s://%s/", scheme, net.JoinHostPort(host, fmt.Sprint(srv.Port())))
	var rows []endpointRow
	for _, ec := range clients {
		res := &loopbacks.Resolver{}
		res.Set(addrs...)
		rr := &roundRobin{addrs: addrs}
		rt, closeClient, err := ec.make(rr, res, clientTLS)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", ec.name, err)
		}
		before := srv.Counts()
		r := closedLoop(ctx, rt, url, o.callers, o.duration)
		closeClient()
		rows = append(rows, endpointRow{client: ec.name, res: r, share: shares(addrs, before, srv.Counts())})
	}
	return addrs, rows, nil
}

// printEndpoints writes a table of the rows: requests, failures, HTTP/2's
// share, and each address's share of requests (and its connections).
func printEndpoints(w io.Writer, title string, addrs []netip.Addr, rows []endpointRow) {
	fmt.Fprintf(w, "\n%s\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "client\tsent\tfailed\tfailed %\tHTTP/2 %\t")
	for _, a := range addrs {
		fmt.Fprintf(tw, "%v: reqs (conns)\t", a)
	}
	fmt.Fprint(tw, "\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.0f\t", r.client, r.res.requests, r.res.failed(),
			100*ratio(int64(r.res.failed()), int64(r.res.requests)), 100*ratio(int64(r.res.h2), int64(r.res.requests)))
		for i, p := range percentOf(r.share) {
			fmt.Fprintf(tw, "%.1f%% (%d)\t", p, r.share[i].conns)
		}
		fmt.Fprint(tw, "\n")
	}
	tw.Flush()
}

// endpointChart draws each client's share of requests by address, and its
// failure rate when failures counts.
func endpointChart(title string, addrs []netip.Addr, rows []endpointRow, failures bool, marks map[netip.Addr]string) chart {
	c := chart{title: title, unit: "%"}
	for _, a := range addrs {
		c.series = append(c.series, strings.TrimSpace(a.String()+" "+marks[a])+": share of requests")
	}
	if failures {
		c.series = append(c.series, "requests failed")
	}
	for _, r := range rows {
		g := group{label: r.client, values: percentOf(r.share)}
		if failures {
			g.values = append(g.values, 100*ratio(int64(r.res.failed()), int64(r.res.requests)))
		}
		c.groups = append(c.groups, g)
	}
	return c
}
