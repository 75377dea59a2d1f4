package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/internal/testkit/benchkit"
)

// clientSpec is one client the benchmark runs: a key for -clients, a name for
// the report, and how to make it.
type clientSpec struct {
	key, name string
	make      func() (rt http.RoundTripper, closeFn func(), err error)
}

// clients is every client the benchmark knows, in the order it runs them.
func clients() []clientSpec {
	return []clientSpec{
		{key: "nethttp", name: "net/http MaxConnsPerHost 64", make: func() (http.RoundTripper, func(), error) {
			t := &http.Transport{MaxConnsPerHost: 64, MaxIdleConnsPerHost: 64}
			return t, t.CloseIdleConnections, nil
		}},
		connactor("fixed", "connactor MaxConnsPerRoute 64", client.Config{MaxConnsPerRoute: 64}),
		// Hand-tuned, knowing the server's k = 4: no more requests in flight
		// than it serves, four more callers waiting, the rest refused.
		connactor("tuned", "connactor 4 conns + 4 pending", client.Config{MaxConnsPerRoute: 4, MaxPendingPerRoute: 4}),
		// The route sets its own limit from the latency it measures, and
		// with QueueTarget sheds the callers of a queue that stands.
		connactor("adaptive", "connactor Adaptive",
			client.Config{MaxConnsPerRoute: 64, Adaptive: &client.AdaptiveLimit{}}),
		connactor("adaptive-codel", "connactor Adaptive + QueueTarget 50ms",
			client.Config{MaxConnsPerRoute: 64, Adaptive: &client.AdaptiveLimit{}, QueueTarget: 50 * time.Millisecond}),
	}
}

func connactor(key, name string, cfg client.Config) clientSpec {
	return clientSpec{key: key, name: name, make: func() (http.RoundTripper, func(), error) {
		cfg.Logger = slog.New(slog.DiscardHandler)
		return benchkit.Connactor(cfg)
	}}
}

// Error classes in the report.
const (
	errRefusedQueueFull = "refused: queue full"
	errRefusedOverload  = "refused: overloaded"
	errDeadlineWaiting  = "deadline: waiting for a connection"
	errDeadlineInFlight = "deadline: in flight"
	errOther            = "other"
)

// classify names err's class; gotConn says whether the request had a
// connection (httptrace's GotConn fired), so was (being) sent.
func classify(err error, gotConn bool) string {
	switch {
	case errors.Is(err, client.ErrQueueFull):
		return errRefusedQueueFull
	case errors.Is(err, client.ErrOverloaded):
		return errRefusedOverload
	case errors.Is(err, context.DeadlineExceeded) && gotConn:
		return errDeadlineInFlight
	case errors.Is(err, context.DeadlineExceeded):
		return errDeadlineWaiting
	}
	msg := err.Error()
	if len(msg) > 60 {
		msg = msg[:60]
	}
	return errOther + ": " + msg
}

// refused says whether a class is the client refusing a caller at once (not
// a wait that ran out).
func refused(class string) bool { return class == errRefusedQueueFull || class == errRefusedOverload }
