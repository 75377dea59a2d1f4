package main

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/connactor/connactor/internal/testkit/toxi"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// net/http's Transport (toxiproxy's API client) ends its connections'
		// loops asynchronously after CloseIdleConnections.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		// protoactor's dead-letter throttle: a one-shot timer goroutine.
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
	)
}

// TestSoakForTwentySecondsKeepsEveryInvariant is the short soak `make test`
// runs: the full soak's load and checks for 20 seconds (under the race
// detector there). The seed is random and printed with the report.
func TestSoakForTwentySecondsKeepsEveryInvariant(t *testing.T) {
	if _, err := toxi.Find(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("toxiproxy is required under CI: %v", err)
		}
		t.Skipf("SKIPPED: %v; the soak runs under CI (or with go run ./cmd/soak -toxiproxy off)", err)
	}
	cfg := defaults()
	cfg.requests, cfg.duration = math.MaxInt64, 20*time.Second
	r, err := run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	r.print(&sb)
	t.Logf("\n%s", sb.String())
	if r.requests == 0 {
		t.Fatal("the soak sent no request")
	}
	if !r.ok() {
		t.Fatal("an invariant broke: see the report")
	}
}
