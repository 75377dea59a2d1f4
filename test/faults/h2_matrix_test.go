package faults_test

import (
	"sync"
	"testing"

	fs "github.com/connactor/connactor/internal/testkit/faultserver"
)

// h2Parallel is how many HTTP/2 cases run at once. Most of a case's time is
// a deadline or a health check running out, not work: running cases side by
// side keeps the matrix short. Each case has its own servers and clients, and
// the baseline is measured before the first and checked after the last.
const h2Parallel = 6

// TestH2FaultMatrix runs every HTTP/2 case against both clients (each over
// TLS with ALPN h2, against scripted servers that write exactly the frames a
// case wants), then checks that the process is back to its descriptor and
// goroutine baseline once every client and server of the run is closed. The
// table goes to $ARTIFACTS/h2faultmatrix.md.
func TestH2FaultMatrix(t *testing.T) {
	base := fs.Measure()
	groups := h2Groups()
	var rows []row
	var slots [][]row
	var wg sync.WaitGroup
	sem := make(chan struct{}, h2Parallel)
	for _, g := range groups {
		gr := make([]row, len(g.cases))
		slots = append(slots, gr)
		for i, hc := range g.cases {
			wg.Add(1)
			go func() { // owned by wg: every case ends before the baseline check
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				gr[i] = runH2Case(t, g.name, hc)
			}()
		}
	}
	wg.Wait()
	for _, gr := range slots {
		rows = append(rows, gr...)
	}
	report(t, rows, "h2faultmatrix.md")
	waitBaseline(t, base)
}

// runH2Case runs hc against each client, one after the other, in a subtest of
// its own (t.Run may be called from several goroutines at once).
func runH2Case(t *testing.T, group string, hc h2Case) row {
	r := row{group: group, name: hc.name, risk: hc.risk, cells: map[string]string{}, passed: true}
	t.Run(group+": "+hc.name, func(t *testing.T) {
		for _, kind := range kinds {
			t.Run(kind, func(t *testing.T) {
				f := hc.setup(t)
				f.opts.h2, f.opts.roots = true, f.h2.Cert.Pool
				tg := newTarget(t, kind, f.opts)
				run := hc.run
				if run == nil {
					run = func(t *testing.T, f *h2fixture, tg *target) outcome { return badThenGood(t, &f.fixture, tg, hc.want) }
				}
				o := run(t, f, tg)
				problems := o.problems
				if o.summary == "" {
					problems = hc.want.check(o, kind == kindConnactor)
				}
				problems = append(problems, f.violations()...)
				r.cells[kind] = o.cell()
				finish(t, tg, problems, &r)
			})
		}
	})
	return r
}
