// Package benchkit holds what the benchmark programs (cmd/tail,
// cmd/overload, cmd/connbench) share: the nearest-rank quantile of a sorted
// sample, the numbers of their tables and charts, the server a run targets
// on 127.0.0.1, the connactor client it measures, and the sampling of a
// client's Stats while the load runs.
package benchkit

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/internal/testkit/loopbacks"
)

// Quantile returns the q-quantile of sorted by nearest rank: the sample of
// rank ceil(q*n), 0 when there is none. The rank forgives q*n the rounding
// error of its product (0.07*100 is 7.000000000000001: rank 7, not 8).
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*q + 0.999999999)
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Millis prints d in milliseconds with decimals digits after the point:
// "1.25ms".
func Millis(d time.Duration, decimals int) string {
	return fmt.Sprintf("%.*fms", decimals, float64(d)/float64(time.Millisecond))
}

// Verdict writes a target's judgement: "met" or "NOT MET".
func Verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT MET"
}

// NiceCeil rounds v up to one of mantissas (ascending, in [1, 10)) times a
// power of ten, or ten times it; 1 for v <= 0. An axis' top or step:
// NiceCeil(v, 1, 2, 5), or with 2.5 as well for finer steps.
func NiceCeil(v float64, mantissas ...float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range mantissas {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// TrimFloat prints an axis label with one decimal, none for a whole v.
// rounded says what a v that only rounds to a whole number at one decimal
// (2.96, 0.04) prints: without its ".0" ("3", "0") when set, with it
// ("3.0", "0.0") when not.
func TrimFloat(v float64, rounded bool) string {
	s := fmt.Sprintf("%.1f", v)
	if rounded || v == math.Trunc(v) {
		return strings.TrimSuffix(s, ".0")
	}
	return s
}

// Serve serves h on a fresh port of 127.0.0.1 and returns its URL
// ("http://127.0.0.1:port/") and the function that stops it: at once when
// drain is 0 (the connections cut, requests in flight included), else
// gracefully, waiting up to drain for the answers in flight. stop returns
// once the server's goroutines have.
func Serve(h http.Handler, drain time.Duration) (url string, stop func(), err error) {
	a := loopbacks.Addr(1)
	srv, err := loopbacks.Start(h, loopbacks.Options{}, a)
	if err != nil {
		return "", nil, err
	}
	return "http://" + srv.AddrPort(a).String() + "/", func() {
		if drain > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), drain)
			defer cancel()
			_ = srv.Shutdown(ctx, a)
		}
		srv.Close()
	}, nil
}

// Connactor makes the connactor client of cfg a run measures, and the
// function that closes it. A cfg without a Logger logs connactor's errors
// only, to stderr.
func Connactor(cfg client.Config) (http.RoundTripper, func(), error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	c, err := client.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	return c, func() { _ = c.Close() }, nil
}

// SampleWhile runs load, calling sample once a period until load returns
// (the first call one period after the start), and returns once the
// sampling has stopped: sample never runs after SampleWhile returns.
func SampleWhile(period time.Duration, sample, load func()) {
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // owned by SampleWhile, which waits for it
		defer close(sampled)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				sample()
			}
		}
	}()
	load()
	close(done)
	<-sampled
}
