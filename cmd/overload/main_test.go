package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connactor/connactor/client"
)

// The server serves k at a time, counts the rest as queued, and counts an
// answer to a caller that gave up while it waited as wasted.
func TestServerCountsItsQueueInFlightAndWastedAnswers(t *testing.T) {
	srv := newKServer(2, time.Millisecond)
	release := make(chan struct{})
	srv.work = func(context.Context, time.Duration) { <-release }
	changes := make(chan serverCounts, 64)
	srv.onChange = func() { changes <- srv.counts() }
	waitFor := func(queued, inFlight int64) {
		t.Helper()
		for c := range changes {
			if c.queued == queued && c.inFlight == inFlight {
				return
			}
		}
	}

	var handlers sync.WaitGroup
	cancels := make([]context.CancelFunc, 5)
	for i := range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			srv.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
		}()
		waitFor(max(0, int64(i)-1), min(2, int64(i)+1))
	}
	cancels[4]() // the last caller gives up while queued
	for range 5 {
		release <- struct{}{}
	}
	handlers.Wait()
	got := srv.counts()
	want := serverCounts{queued: 0, inFlight: 0, served: 5, wasted: 1}
	if got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
	for _, c := range cancels {
		c()
	}
}

// Once the run is over, the server skips the requests of callers already
// gone instead of serving them.
func TestServerSkipsGoneCallersOnceTheRunIsOver(t *testing.T) {
	srv := newKServer(1, time.Hour)
	srv.skipGone.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", rec.Code)
	}
	if got := srv.counts(); got != (serverCounts{skipped: 1}) {
		t.Errorf("counts = %+v, want one skipped", got)
	}
}

func TestDefaultScheduleOverloadsSlowsDownAndRecovers(t *testing.T) {
	sch := defaultSchedule(4, 20*time.Millisecond, 1)
	wantPhases := []phase{
		{"overload", 12 * time.Second, 400, 20 * time.Millisecond},
		{"slowdown", 10 * time.Second, 400, 200 * time.Millisecond},
		{"recovery", 12 * time.Second, 150, 20 * time.Millisecond},
	}
	if fmt.Sprint(sch) != fmt.Sprint(schedule(wantPhases)) {
		t.Fatalf("schedule = %v, want %v", sch, wantPhases)
	}
	if got := sch.total(); got != 34*time.Second {
		t.Errorf("total = %v, want 34s", got)
	}
	for _, tc := range []struct {
		t    time.Duration
		want int
	}{{0, 0}, {12*time.Second - 1, 0}, {12 * time.Second, 1}, {22 * time.Second, 2}, {time.Hour, 2}} {
		if got := sch.at(tc.t); got != tc.want {
			t.Errorf("at(%v) = %d, want %d", tc.t, got, tc.want)
		}
	}
	if got := sch.start(2); got != 22*time.Second {
		t.Errorf("start(2) = %v, want 22s", got)
	}
	arr := sch.arrivals()
	if len(arr) != 4800+4000+1800 {
		t.Errorf("%d arrivals, want 10600", len(arr))
	}
	if arr[1] != 2500*time.Microsecond || arr[4800] != 12*time.Second {
		t.Errorf("arrivals start %v, %v..., and the second phase's at %v", arr[0], arr[1], arr[4800])
	}
	if got := defaultSchedule(4, 20*time.Millisecond, 0.5).total(); got != 17*time.Second {
		t.Errorf("scale 0.5: total %v, want 17s", got)
	}
}

func TestPhaseStatsSumUpSuccessesRefusalsErrorsAndTheServer(t *testing.T) {
	msd := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	r := &run{
		k: 2,
		sch: schedule{
			{name: "a", duration: time.Second, rate: 10, service: 20 * time.Millisecond},
			{name: "b", duration: time.Second, rate: 10, service: 200 * time.Millisecond},
		},
		outcomes: []outcome{
			{arrived: msd(0), took: msd(10)},
			{arrived: msd(100), took: msd(30)},
			{arrived: msd(200), took: msd(20)},
			{arrived: msd(300), took: msd(1), class: errRefusedQueueFull},
			{arrived: msd(900), took: msd(200)}, // ends in b
			{arrived: msd(1000), took: msd(1000), class: errDeadlineInFlight},
		},
		server: []serverSample{
			{t: msd(0), serverCounts: serverCounts{queued: 1}},
			{t: msd(500), serverCounts: serverCounts{queued: 3, wasted: 2}},
			{t: msd(1000), serverCounts: serverCounts{queued: 6, wasted: 2}},
			{t: msd(1500), serverCounts: serverCounts{queued: 2, wasted: 5}},
		},
		final: serverCounts{wasted: 7},
	}
	got := r.phases()
	a, b := got[0], got[1]
	if a.ok != 3 || a.goodput != 3 || a.capacity != 100 {
		t.Errorf("phase a: %d ok, goodput %v of %v; want 3, 3 of 100", a.ok, a.goodput, a.capacity)
	}
	if a.p50 != msd(20) || a.p99 != msd(30) || a.p999 != msd(30) {
		t.Errorf("phase a: p50 %v p99 %v p99.9 %v, want 20ms 30ms 30ms", a.p50, a.p99, a.p999)
	}
	if a.refusals != 1 || a.refusedP99 != msd(1) || a.errors[errRefusedQueueFull] != 1 {
		t.Errorf("phase a: %d refusals (p99 %v), errors %v; want 1 (1ms)", a.refusals, a.refusedP99, a.errors)
	}
	if a.queueMean != 2 || a.queueMax != 3 || a.wasted != 2 {
		t.Errorf("phase a: queue %v/%d, wasted %d; want 2/3, 2", a.queueMean, a.queueMax, a.wasted)
	}
	if b.ok != 1 || b.p99 != msd(200) || b.errors[errDeadlineInFlight] != 1 || b.refusals != 0 {
		t.Errorf("phase b: %d ok (p99 %v), %d refusals, errors %v; want 1 (200ms), 0, one deadline", b.ok, b.p99, b.refusals, b.errors)
	}
	if b.queueMean != 4 || b.queueMax != 6 || b.wasted != 5 {
		t.Errorf("phase b: queue %v/%d, wasted %d; want 4/6, 5 (3 sampled, 2 after)", b.queueMean, b.queueMax, b.wasted)
	}

	tl := r.timeline(500 * time.Millisecond)
	if len(tl) != 4 || tl[0].goodput != 6 || tl[0].failures != 2 || tl[0].p99 != msd(30) || tl[0].queue != 1 || tl[0].samples != 1 {
		t.Errorf("timeline = %+v; want 4 buckets, the first with 6/s ok, 2/s failed, p99 30ms, queue 1", tl)
	}
}

func TestClassifyTellsRefusalsFromDeadlinesWaitingAndInFlight(t *testing.T) {
	for _, tc := range []struct {
		err     error
		gotConn bool
		want    string
	}{
		{fmt.Errorf("wrapped: %w", client.ErrQueueFull), false, errRefusedQueueFull},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), false, errDeadlineWaiting},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), true, errDeadlineInFlight},
		{fmt.Errorf("connection reset"), true, errOther + ": connection reset"},
	} {
		if got := classify(tc.err, tc.gotConn); got != tc.want {
			t.Errorf("classify(%v, %v) = %q, want %q", tc.err, tc.gotConn, got, tc.want)
		}
	}
	if !refused(errRefusedQueueFull) || refused(errDeadlineWaiting) {
		t.Error("refused() is wrong")
	}
}

func TestParseFlagsRefusesUnknownClientsAndBadValues(t *testing.T) {
	for _, args := range [][]string{{"-clients", "nope"}, {"-k", "0"}, {"-scale", "-1"}} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%v) accepted", args)
		}
	}
	o, err := parseFlags([]string{"-clients", "tuned,nethttp", "-scale", "0.5"})
	if err != nil || len(o.clients) != 2 || o.scale != 0.5 || o.k != 4 {
		t.Errorf("parseFlags = %+v, %v", o, err)
	}
}

// A short run of two clients end to end: each phase a few tenths of a
// second, a report line per client and phase, and a chart that is SVG.
func TestAShortRunReportsEveryPhaseAndDrawsAChart(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "overload.svg")
	o, err := parseFlags([]string{"-scale", "0.03", "-clients", "tuned,nethttp", "-svg", svg})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runAll(o, &out); err != nil {
		t.Fatal(err)
	}
	for _, client := range []string{"connactor 4 conns + 4 pending", "net/http MaxConnsPerHost 64"} {
		for _, phase := range []string{"overload", "slowdown", "recovery"} {
			if !strings.Contains(out.String(), "| "+client+" | "+phase+" | ") {
				t.Errorf("no line for %s, %s in\n%s", client, phase, out.String())
			}
		}
	}
	data, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	polylines := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	for _, client := range []string{"connactor 4 conns + 4 pending", "net/http MaxConnsPerHost 64"} {
		if !bytes.Contains(data, []byte(">"+client+"<")) {
			t.Errorf("the chart's legend lacks %s", client)
		}
	}
	if polylines < 2*2 {
		t.Errorf("%d lines in the chart, want at least goodput and queue depth for each of 2 clients", polylines)
	}
}
