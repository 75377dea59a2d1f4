// Package faults_test is the fault matrix: every case runs against
// connactor (through its public client API only) and against net/http's
// Transport in the same run; TestFaultMatrix has the HTTP/1.1 cases (and the
// toxiproxy ones), TestH2FaultMatrix the HTTP/2 ones, both clients speaking
// HTTP/2 over TLS to servers scripted frame by frame. For connactor the test
// asserts, for every case:
//
//   - the bad request's error is typed (errors.Is against client/errors.go's
//     sentinels, context errors), or its response is correct, its body naming
//     the request it answers (so a desync is caught);
//   - the bad connection is never re-used: the good request after it arrives on
//     a new connection (server-side accept counts), unless the fault was one
//     HTTP/2 stream's, which leaves its connection sound;
//   - Stats end with nothing leased or pending;
//   - the client's sockets, counted through Config.DialContext, equal its idle
//     connections.
//
// net/http's results are recorded beside connactor's, for information. The
// tables are logged and written as markdown to $ARTIFACTS/faultmatrix.md and
// h2faultmatrix.md (or under testdata/artifacts when ARTIFACTS is unset).
package faults_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"

	"go.uber.org/goleak"

	fs "github.com/connactor/connactor/internal/testkit/faultserver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// net/http's Transport ends its connections' loops asynchronously after
		// CloseIdleConnections.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		// protoactor's dead-letter throttle: a one-shot timer goroutine.
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
	)
}

// row is one case's line in the table.
type row struct {
	group, name string
	risk        string
	cells       map[string]string // by client kind
	passed      bool              // connactor met every expectation
}

// TestFaultMatrix runs every case against both clients, then checks that the
// process is back to its descriptor and goroutine baseline once every client
// and server of the run is closed.
func TestFaultMatrix(t *testing.T) {
	base := fs.Measure()
	var rows []row
	groups := []struct {
		name  string
		cases func() []faultCase
	}{
		{"framing", framingCases},
		{"slow and broken servers", slowAndBrokenCases},
		{"TLS and DNS", tlsAndDNSCases},
	}
	for _, g := range groups {
		for _, fc := range g.cases() {
			rows = append(rows, runCase(t, g.name, fc))
		}
	}
	t.Run("toxiproxy", func(t *testing.T) {
		rows = append(rows, runToxicCases(t)...)
	})
	report(t, rows, "faultmatrix.md")
	waitBaseline(t, base)
}

// runCase runs fc against each client in a subtest of its own.
func runCase(t *testing.T, group string, fc faultCase) row {
	r := row{group: group, name: fc.name, risk: fc.risk, cells: map[string]string{}, passed: true}
	t.Run(fc.name, func(t *testing.T) {
		for _, kind := range kinds {
			t.Run(kind, func(t *testing.T) {
				f := fc.setup(t)
				tg := newTarget(t, kind, f.opts)
				var o outcome
				if fc.run != nil {
					o = fc.run(t, f, tg)
				} else {
					o = badThenGood(t, f, tg, fc.want)
				}
				problems := o.problems
				if o.summary == "" {
					problems = fc.want.check(o, kind == kindConnactor)
				}
				r.cells[kind] = o.cell()
				finish(t, tg, problems, &r)
			})
		}
	})
	return r
}

// finish checks that the client came to rest, reports connactor's problems as
// test failures and net/http's as notes in its cell.
func finish(t *testing.T, tg *target, problems []string, r *row) {
	rest, atRest := tg.settle()
	if tg.kind == kindConnactor && !atRest {
		problems = append(problems, fmt.Sprintf("not at rest: %d leased, %d pending, %d sockets open for %d idle connections",
			rest.Leased, rest.Pending, rest.Sockets, rest.Idle))
	}
	if tg.kind != kindConnactor {
		if len(problems) > 0 {
			r.cells[tg.kind] = "✗ " + r.cells[tg.kind]
		}
		return
	}
	mark := "✓ "
	if len(problems) > 0 {
		mark, r.passed = "✗ ", false
	}
	r.cells[tg.kind] = mark + r.cells[tg.kind]
	for _, p := range problems {
		t.Error(p)
	}
}

// report logs the table and writes it as markdown to file, under $ARTIFACTS
// (or testdata/artifacts).
func report(t *testing.T, rows []row, file string) {
	var sb strings.Builder
	sb.WriteString("| # | case | risk | connactor | net/http |\n|---|---|---|---|---|\n")
	n := 0
	for _, r := range rows {
		if len(r.cells) == 0 {
			continue // filtered out by -run
		}
		n++
		fmt.Fprintf(&sb, "| %d | %s: %s | %s | %s | %s |\n", n, r.group, r.name, r.risk,
			r.cells[kindConnactor], r.cells[kindNetHTTP])
	}
	t.Logf("%s (✓/✗: connactor met its expectations; net/http's ✗ marks what connactor would fail for):\n%s", file, sb.String())
	dir := os.Getenv("ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("artifacts: %v", err)
		return
	}
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Logf("artifacts: %v", err)
		return
	}
	t.Logf("written to %s", path)
}

// waitBaseline waits (settleWait at most) for the process to hold no more
// descriptors and goroutines than at base.
func waitBaseline(t *testing.T, base fs.Resources) {
	now, ok := fs.WaitBaseline(base, settleWait)
	if ok {
		t.Logf("baseline: %d descriptors, %d goroutines before; %d and %d after", base.FDs, base.Goroutines, now.FDs, now.Goroutines)
		return
	}
	var dump strings.Builder
	pprof.Lookup("goroutine").WriteTo(&dump, 1)
	t.Errorf("not back to baseline: %d descriptors, %d goroutines (before: %d, %d)\n%s",
		now.FDs, now.Goroutines, base.FDs, base.Goroutines, dump.String())
}
