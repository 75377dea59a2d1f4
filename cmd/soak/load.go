package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/internal/testkit/errname"
)

// mix is the share of each path in the load, in parts of 10,000: mostly good
// answers, with every scripted fault mixed in.
var mix = []struct {
	path   string
	weight int
}{
	{"/ok", 6000}, {"/chunked", 2300}, {"/big", 800},
	{"/extra", 200}, {"/cl-te", 150}, {"/close", 250},
	{"/rst", 100}, {"/trunc", 100}, {"/status0", 90},
	{"/slow", 5}, {"/stall", 5},
}

var mixTotal = func() int {
	n := 0
	for _, m := range mix {
		n += m.weight
	}
	return n
}()

func pickPath(rng *rand.Rand) string {
	n := rng.IntN(mixTotal)
	for _, m := range mix {
		if n < m.weight {
			return m.path
		}
		n -= m.weight
	}
	return "/ok"
}

// cleanPath reports whether a direct request to path, never cancelled, must
// succeed.
func cleanPath(path string) bool { return path == "/ok" || path == "/chunked" || path == "/big" }

// requestWait bounds each request: far beyond what any of them needs, so a
// request that reaches it shows a hang.
const requestWait = 60 * time.Second

// tally is one caller's counts, merged at the end.
type tally struct {
	outcomes      map[string]int64
	desyncs       int64
	untyped       int64
	cleanFailures int64
	examples      map[string][]string // the first few violations of each kind, for the report
}

func newTally() *tally { return &tally{outcomes: map[string]int64{}, examples: map[string][]string{}} }

// maxExamples is how many violations of each kind the report shows.
const maxExamples = 2

func (t *tally) violation(kind, format string, args ...any) {
	if len(t.examples[kind]) < maxExamples {
		t.examples[kind] = append(t.examples[kind], fmt.Sprintf(format, args...))
	}
}

func (t *tally) merge(o *tally) {
	for k, v := range o.outcomes {
		t.outcomes[k] += v
	}
	t.desyncs += o.desyncs
	t.untyped += o.untyped
	t.cleanFailures += o.cleanFailures
	for kind, es := range o.examples {
		for _, e := range es {
			if len(t.examples[kind]) < maxExamples {
				t.examples[kind] = append(t.examples[kind], e)
			}
		}
	}
}

// load is the running load: callers share the request budget and the stop.
type load struct {
	cfg    config
	c      *client.Client
	routes []*route
	issued atomic.Int64
	stop   chan struct{}
}

// run starts cfg.callers callers and returns their merged tally once the
// request budget is spent or stop is closed.
func (l *load) run() *tally {
	var wg sync.WaitGroup
	tallies := make([]*tally, l.cfg.callers)
	for i := range tallies {
		tallies[i] = newTally()
		wg.Add(1)
		go func() { // owned by wg
			defer wg.Done()
			l.caller(i, tallies[i])
		}()
	}
	wg.Wait()
	all := newTally()
	for _, t := range tallies {
		all.merge(t)
	}
	return all
}

func (l *load) caller(i int, t *tally) {
	rng := rand.New(rand.NewPCG(l.cfg.seed, uint64(i)))
	for seq := 0; ; seq++ {
		if l.issued.Add(1) > l.cfg.requests {
			return
		}
		select {
		case <-l.stop:
			return
		default:
		}
		r := l.routes[rng.IntN(len(l.routes))]
		path := pickPath(rng)
		if path == "/extra" && r.proxy != nil {
			// Through toxiproxy the extra bytes can arrive after the client has
			// written its next request on the connection (the slicer and
			// bandwidth toxics space them out): they are then indistinguishable
			// from that request's response, for any HTTP/1.1 client. Direct, they
			// arrive with the response they follow, and must never be read as
			// the next one's.
			path = "/ok"
		}
		id := fmt.Sprintf("%d-%d", i, seq)
		cancelIt := rng.Float64() < l.cfg.cancelRate
		closeEarly := rng.Float64() < l.cfg.earlyCloseRate
		post := (path == "/close" || path == "/ok") && rng.IntN(4) == 0
		outcome, bad := l.one(rng, r, path, id, post, cancelIt, closeEarly)
		switch {
		case bad == badDesync:
			t.outcomes["DESYNC: a body naming another request"]++
			t.desyncs++
			t.violation("desync", "desync: %s %s%s?id=%s (%s): %s", method(post), r.addr, path, id, r.kind(), outcome)
			continue
		case bad == badUntyped:
			t.outcomes["UNTYPED error"]++
			t.untyped++
			t.violation("untyped", "untyped error: %s%s?id=%s (%s): %s", r.addr, path, id, r.kind(), outcome)
			continue
		}
		t.outcomes[outcome]++
		if r.proxy == nil && cleanPath(path) && !cancelIt && !strings.HasPrefix(outcome, "ok") {
			t.cleanFailures++
			t.violation("clean", "clean request failed: %s %s%s?id=%s (%s): %s", method(post), r.addr, path, id, r.kind(), outcome)
		}
	}
}

func method(post bool) string {
	if post {
		return http.MethodPost
	}
	return http.MethodGet
}

// Violations one request can show.
const (
	badNone = iota
	badDesync
	badUntyped
)

// one sends one request and reads (or closes early) its body; it returns the
// outcome's name and the violation it shows, if any.
func (l *load) one(rng *rand.Rand, r *route, path, id string, post, cancelIt, closeEarly bool) (string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), requestWait)
	defer cancel()
	if cancelIt {
		t := time.AfterFunc(time.Duration(rng.IntN(3000))*time.Microsecond, cancel)
		defer t.Stop()
	}
	req, err := http.NewRequestWithContext(ctx, method(post), "http://"+r.addr+path+"?id="+id, nil)
	if err != nil {
		return "request: " + err.Error(), badUntyped
	}
	if post {
		// A body that cannot be replayed (no GetBody): a retry must not send it twice.
		body := "payload " + id
		req.Body, req.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
	}
	resp, err := l.c.RoundTrip(req)
	prefix := ""
	if cancelIt {
		prefix = "cancelled: "
	}
	if err != nil {
		if !errors.Is(err, client.ErrNotSent) && !errors.Is(err, client.ErrOutcomeUnknown) && !errors.Is(err, client.ErrClosed) {
			return prefix + shortErr(err), badUntyped
		}
		return prefix + errname.Of(err), badNone
	}
	want := expectedBody(path, id)
	if closeEarly {
		buf := make([]byte, rng.IntN(16))
		n, rerr := io.ReadFull(resp.Body, buf)
		resp.Body.Close()
		if !strings.HasPrefix(want, string(buf[:n])) {
			return fmt.Sprintf("%d, body starts %q", resp.StatusCode, buf[:n]), badDesync
		}
		if rerr != nil && rerr != io.ErrUnexpectedEOF && rerr != io.EOF {
			return prefix + "body: " + bodyErrName(rerr), badNone
		}
		return "ok, body closed early", badNone
	}
	b, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rerr != nil {
		if !strings.HasPrefix(want, string(b)) {
			return fmt.Sprintf("%d, body starts %q", resp.StatusCode, short(string(b))), badDesync
		}
		return prefix + "body: " + bodyErrName(rerr), badNone
	}
	if string(b) != want || resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("%d %q", resp.StatusCode, short(string(b))), badDesync
	}
	return "ok", badNone
}

func bodyErrName(err error) string {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected EOF"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, context.Canceled):
		return "context canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	default:
		return shortErr(err)
	}
}

func shortErr(err error) string { return short(err.Error()) }

func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}
