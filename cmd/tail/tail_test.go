package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/internal/testkit/benchkit"
	"github.com/connactor/connactor/internal/testkit/loopbacks"
)

func TestStallServerStallsOneRequestInEveryNAndCountsThem(t *testing.T) {
	srv := &stallServer{stall: time.Millisecond, stallEvery: 5}
	url, stop, err := benchkit.Serve(srv, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	for i := range 23 {
		status, _, _, err := get(tr, url)
		if err != nil || status != http.StatusOK {
			t.Fatalf("request %d: status %d, %v", i, status, err)
		}
	}
	if seen, stalled := srv.counts(); seen != 23 || stalled != 4 {
		t.Fatalf("the server saw %d and stalled %d, want 23 and 4", seen, stalled)
	}
}

func TestStallServerLetsACancelledRequestGo(t *testing.T) {
	srv := &stallServer{stall: time.Hour, stallEvery: 1}
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	done := make(chan struct{})
	rec := httptest.NewRecorder()
	go func() { // owned by this test, which waits for done
		defer close(done)
		srv.ServeHTTP(rec, req)
	}()
	cancel()
	<-done
	if rec.Body.Len() != 0 {
		t.Fatalf("a cancelled request was answered %q", rec.Body)
	}
	if _, stalled := srv.counts(); stalled != 1 {
		t.Fatalf("stalled %d, want 1", stalled)
	}
}

func TestSickHandlerAnswers503OnTheSickAddressOnly(t *testing.T) {
	sick := netip.MustParseAddr("127.0.0.3")
	h := sickHandler(sick, 0)
	for _, tc := range []struct {
		local string
		want  int
	}{{"127.0.0.3:8080", http.StatusServiceUnavailable}, {"127.0.0.2:8080", http.StatusOK}, {"127.0.0.4:8080", http.StatusOK}} {
		local := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(tc.local))
		ctx := context.WithValue(context.Background(), http.LocalAddrContextKey, net.Addr(local))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil))
		if rec.Code != tc.want {
			t.Errorf("on %s: status %d, want %d", tc.local, rec.Code, tc.want)
		}
	}
}

func TestSharesCountOnlyTheRequestsOfTheRun(t *testing.T) {
	a, b, c := loopbacks.Addr(2), loopbacks.Addr(3), loopbacks.Addr(4)
	before := map[netip.Addr]loopbacks.Counts{a: {Accepted: 3, Requests: 100}, b: {Accepted: 1, Requests: 50}}
	after := map[netip.Addr]loopbacks.Counts{a: {Accepted: 5, Requests: 160}, b: {Accepted: 1, Requests: 80}, c: {Accepted: 2, Requests: 10}}
	got := shares([]netip.Addr{a, b, c}, before, after)
	want := []addrCount{{a, 60, 2}, {b, 30, 0}, {c, 10, 2}}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("shares = %v, want %v", got, want)
		}
	}
	pct := percentOf(got)
	for i, w := range []float64{60, 30, 10} {
		if math.Abs(pct[i]-w) > 1e-9 {
			t.Fatalf("percentOf = %v, want 60, 30, 10", pct)
		}
	}
	if pct := percentOf([]addrCount{{a, 0, 0}}); pct[0] != 0 {
		t.Fatalf("no requests: share %v, want 0", pct[0])
	}
}

func TestRoundRobinDialsEachAddressInTurn(t *testing.T) {
	rr := &roundRobin{addrs: loopbacks.Addrs(2, 4)}
	var got []string
	for range 4 {
		to, err := rr.pick("svc.test:8443")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, to)
	}
	if want := "127.0.0.2:8443 127.0.0.3:8443 127.0.0.4:8443 127.0.0.2:8443"; strings.Join(got, " ") != want {
		t.Fatalf("dials went to %v, want %s", got, want)
	}
	if _, err := rr.pick("no-port"); err == nil {
		t.Fatal("an address without a port was dialed")
	}
}

// wellFormed fails t unless b parses as XML with an svg root.
func wellFormed(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, b)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
}

func TestChartBarsGrowWithTheirValues(t *testing.T) {
	for _, log := range []bool{false, true} {
		c := chart{title: "a <b> & c", unit: " ms", log: log, series: []string{"x", "y"},
			groups: []group{{"p50", []float64{1, 2}}, {"p99", []float64{200, math.NaN()}}}}
		wellFormed(t, c.svg())
		scale := c.scale()
		if !(scale(1) > 0 && scale(1) < scale(2) && scale(2) < scale(200) && scale(200) <= barArea) {
			t.Fatalf("log %v: bars 1, 2, 200 are %v, %v, %v long", log, scale(1), scale(2), scale(200))
		}
	}
	if n := (chart{}).scale()(5); n != 0 {
		t.Fatalf("an empty chart draws a bar of %v", n)
	}
}

func TestEveryScenarioRunsAndDrawsItsChart(t *testing.T) {
	scenarios := []string{"tail"}
	if loopbacks.Available() {
		scenarios = append(scenarios, "sick", "spread")
	} else {
		t.Log("only the tail scenario: this machine cannot listen on 127.0.0.2")
	}
	dir := t.TempDir()
	var printed bytes.Buffer
	err := run(context.Background(), &printed, options{scenarios: scenarios, duration: 150 * time.Millisecond,
		tailCallers: 2, callers: 4, stall: time.Millisecond, stallEvery: 10, svgDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	out := printed.String()
	for _, s := range scenarios {
		name := map[string]string{"tail": "tail-latency.svg", "sick": "tail-sick.svg", "spread": "tail-spread.svg"}[s]
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		wellFormed(t, b)
	}
	for _, want := range []string{"net/http", "connactor", "p99.9"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the tables lack %q:\n%s", want, out)
		}
	}
	if err := run(context.Background(), io.Discard, options{scenarios: []string{"nope"}}); err == nil {
		t.Fatal("an unknown scenario ran")
	}
}

func TestARunReadsTheHedgeDelayFromTheRoutesStats(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	rt, closeClient, err := benchkit.Connactor(client.Config{Hedge: &client.HedgePolicy{Delay: 3 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient()
	c := rt.(*client.Client)
	hr := sampleHedge(c, func() {
		if _, _, _, err := get(c, srv.URL); err != nil {
			t.Error(err)
		}
	})
	if len(hr.delays) == 0 || hr.delays[len(hr.delays)-1] != 3*time.Millisecond {
		t.Fatalf("delays read %v, want the policy's 3ms last", hr.delays)
	}
}

func TestTheHedgeLineReadsTheRunAgainstTheTarget(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = ms(1) // p50 1 ms
	}
	lat[98], lat[99] = ms(6), ms(9) // p99 6 ms
	row := tailRow{client: "connactor+hedge", res: result{latencies: lat, requests: 100}, seen: 103,
		hedge: hedgeReading{delays: []time.Duration{ms(1), ms(2), ms(4)}, hedges: 3, wins: 2}}
	var out bytes.Buffer
	printHedge(&out, row)
	for _, want := range []string{"median 2.00ms, 1.00ms to 4.00ms over 3 samples", "3 hedged attempts, 2 won",
		"6.00ms <= 7.00ms: met", "3.0 %: met"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the hedge line lacks %q:\n%s", want, out.String())
		}
	}
	row.res.latencies[98] = ms(8) // p99 8 ms > 5 x 1 + 2
	row.seen = 106
	out.Reset()
	printHedge(&out, row)
	if !strings.Contains(out.String(), "8.00ms <= 7.00ms: NOT MET") || !strings.Contains(out.String(), "6.0 %: NOT MET") {
		t.Errorf("the hedge line should say the targets are not met:\n%s", out.String())
	}
	out.Reset()
	printHedge(&out, tailRow{client: "net/http", res: result{latencies: lat, requests: 100}, seen: 100})
	if out.Len() != 0 {
		t.Errorf("a client without hedging printed a hedge line: %s", out.String())
	}
}
