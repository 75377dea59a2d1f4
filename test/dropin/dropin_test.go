package dropin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// childTimeout is the -test.timeout of one run of a library's test binary:
// longer than any suite takes on a loaded 2-core machine, short enough that a
// request hanging for good costs minutes, not the whole CI job.
const childTimeout = 4 * time.Minute

func TestLibrariesOwnSuitesPassWithConnactorAsTheirTransport(t *testing.T) {
	how, err := baselineMode()
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the connactor module root: %v", err)
	}
	// The suites spend most of their time in their own sleeps and timeouts:
	// all three run at once, however small -parallel is (t.Run from
	// goroutines of this test rather than t.Parallel, which -parallel bounds).
	var wg sync.WaitGroup
	for _, s := range suites {
		wg.Go(func() {
			t.Run(s.Name, func(t *testing.T) { runSuite(t, s, root, how) })
		})
	}
	wg.Wait()
}

// runSuite runs s's tests with connactor and holds them to net/http's
// results: the recorded baseline, or a net/http run at the same time (most of
// the suites' time is their own sleeps) when the record does not match the
// suite or how asks for one.
func runSuite(t *testing.T, s *suite, root, how string) {
	ctx := t.Context()
	timeout := childTimeout
	if d, ok := t.Deadline(); ok {
		timeout = min(timeout, time.Until(d)-30*time.Second)
	}
	rec, err := loadBaseline(s)
	if err != nil {
		t.Fatal(err)
	}
	stale := rec.stale(s)
	live := how != baselineRecorded || stale != ""

	tmp := t.TempDir()
	dir, err := prepare(ctx, s, root, tmp)
	var netErr *networkError
	if errors.As(err, &netErr) && os.Getenv("CI") != "true" {
		t.Skipf("SKIPPED: %s@%s could not be fetched or tidied (is the Go module proxy unreachable?); "+
			"under CI=true this fails: %v", s.Module, s.Version, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(tmp, "connactor-was-used")
	std := mode{Name: "net/http"}
	con := mode{Name: "connactor", Tags: tagConnactor, Env: []string{markerEnv + "=" + marker}}
	modes := []mode{con}
	if live {
		modes = append(modes, std)
	}
	bins, err := buildSuite(ctx, s, dir, filepath.Join(tmp, "bin"), modes)
	if err != nil {
		t.Fatal(err)
	}

	var stdRes, conRes results
	var stdErr, conErr error
	var wg sync.WaitGroup
	wg.Go(func() { conRes, conErr = runSuitePackages(ctx, s, bins[con.Name], con, timeout, nil) })
	if live {
		wg.Go(func() { stdRes, stdErr = runSuitePackages(ctx, s, bins[std.Name], std, timeout, nil) })
	}
	wg.Wait()
	if err := errors.Join(stdErr, conErr); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		// The -tags side of the injection point was never called.
		t.Fatalf("the connactor run never made a connactor client (the injection point is dead): %v", err)
	}
	checkSkipped(t, ctx, s, bins[con.Name])

	if live {
		// Both runs share the machine (and, in one library, a fixed port):
		// what failed with net/http is run once more alone before it counts.
		var again []string
		for _, n := range judge(s, stdRes, conRes).StdFails {
			again = append(again, topLevel(n))
		}
		slices.Sort(again)
		if again = slices.Compact(again); len(again) > 0 {
			t.Logf("%s: running again with net/http, alone: %s", s.Name, strings.Join(again, " "))
			rs, err := runSuitePackages(ctx, s, bins[std.Name], std, timeout, again)
			if err != nil {
				t.Fatal(err)
			}
			stdRes = merge(stdRes, rs)
		}
	} else {
		stdRes = rec.results()
		for _, n := range unrecorded(stdRes, conRes) {
			t.Errorf("%s: ran with connactor but is not in %s: %s", n, baselinePath(s), recordHint(s))
		}
	}
	v := judge(s, stdRes, conRes)
	if len(v.Retry) > 0 {
		t.Logf("%s: running again with connactor, alone: %s", s.Name, strings.Join(v.Retry, " "))
		rs, err := runSuitePackages(ctx, s, bins[con.Name], con, timeout, v.Retry)
		if err != nil {
			t.Fatal(err)
		}
		conRes = merge(conRes, rs)
		v = judge(s, stdRes, conRes)
	}
	if out := os.Getenv("CONNACTOR_DROPIN_OUT"); out != "" {
		saveResults(t, out, s.Name, stdRes, conRes)
	}
	report(t, s, stdRes, conRes, v, live)
	for _, p := range v.Problems {
		t.Error(p)
	}
	if live {
		checkBaseline(t, s, rec, stale, how, stdRes)
	}
}

// checkBaseline holds the recorded baseline rec to the net/http run std:
// it records std under -dropin.baseline=record, fails the test when the
// record is stale (saying how to record it anew), and, under check, when a
// verdict differs.
func checkBaseline(t *testing.T, s *suite, rec *baseline, stale, how string, std results) {
	var diff []string
	if rec != nil {
		diff = rec.diff(std)
	}
	switch {
	case how == baselineRecord:
		if err := newBaseline(s, std).save(s); err != nil {
			t.Fatal(err)
		}
		for _, d := range diff {
			t.Logf("%s: baseline change: %s", s.Name, d)
		}
		t.Logf("%s: recorded the net/http baseline in %s (%d tests, %d verdicts changed)", s.Name, baselinePath(s), len(std), len(diff))
	case stale != "":
		t.Errorf("%s: %s: the net/http run above is the new baseline (connactor was held to it); look at its verdicts, then %s",
			s.Name, stale, recordHint(s))
	default:
		for _, d := range diff {
			t.Errorf("%s: the recorded baseline differs from net/http's run: %s; %s", s.Name, d, recordHint(s))
		}
	}
}

// recordHint says how to record s's baseline anew.
func recordHint(s *suite) string {
	return "record it with `make dropin-baseline DROPIN_BASELINE=record` (or `go test ./test/dropin -run " +
		"TestLibrariesOwnSuites -dropin.baseline=record`) and commit test/dropin/" + filepath.ToSlash(baselinePath(s))
}

// checkSkipped fails the test for an entry of s.Skipped that names no
// top-level test of the suite (-skip cannot tell).
func checkSkipped(t *testing.T, ctx context.Context, s *suite, bins []*testBinary) {
	all := map[string]bool{}
	for _, b := range bins {
		names, err := listTests(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(all, names)
	}
	for _, n := range slices.Sorted(maps.Keys(s.Skipped)) {
		if !all[n] {
			t.Errorf("%s: listed in Skipped but no such top-level test", n)
		}
	}
}

// buildSuite builds the test binary of each of s's packages in each of modes
// (at the same time: each is a go command of its own) into out, and returns
// them by mode name, in s.Pkgs's order.
func buildSuite(ctx context.Context, s *suite, dir, out string, modes []mode) (map[string][]*testBinary, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	bins := map[string][]*testBinary{}
	errs := make([]error, len(modes)*len(s.Pkgs))
	var wg sync.WaitGroup
	for i, m := range modes {
		mb := make([]*testBinary, len(s.Pkgs))
		bins[m.Name] = mb
		for j, pkg := range s.Pkgs {
			wg.Go(func() { mb[j], errs[i*len(s.Pkgs)+j] = buildTests(ctx, dir, pkg, m, out) })
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	return bins, nil
}

// runSuitePackages runs the tests of the suite's packages (their binaries
// bins, every package and every one of its s.Shards at the same time) in mode
// m; with only non-empty (prefixed top-level names), just those tests, one
// process a package.
func runSuitePackages(ctx context.Context, s *suite, bins []*testBinary, m mode, timeout time.Duration, only []string) (results, error) {
	type run struct {
		b    *testBinary
		m    mode
		only []string
	}
	var runs []run
	for _, b := range bins {
		prefix := b.prefix()
		pm := m
		pm.Skip = slices.Clone(m.Skip)
		skip := func(names map[string]string) {
			for n := range names {
				if rest, ok := strings.CutPrefix(n, prefix); ok && !strings.ContainsAny(rest, ":/") {
					pm.Skip = append(pm.Skip, rest)
				}
			}
		}
		skip(s.Skipped)
		if m.Tags == tagConnactor {
			skip(s.Excluded)
		}
		slices.Sort(pm.Skip)
		if len(only) > 0 {
			var names []string
			for _, n := range only {
				if rest, ok := strings.CutPrefix(n, prefix); ok && !strings.Contains(rest, ":") {
					names = append(names, rest)
				}
			}
			if len(names) > 0 {
				runs = append(runs, run{b, pm, names})
			}
			continue
		}
		listed, err := listTests(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", s.Name, b.Pkg, err)
		}
		var names []string
		for _, n := range slices.Sorted(maps.Keys(listed)) {
			n = strings.TrimPrefix(n, prefix)
			if !strings.HasPrefix(n, "Benchmark") && !slices.Contains(pm.Skip, n) {
				names = append(names, n)
			}
		}
		// Interleaved, so that tests next to each other in name order (often
		// alike, and alike in cost) go to different shards.
		slice := make([][]string, min(max(s.Shards, 1), len(names)))
		for k, n := range names {
			slice[k%len(slice)] = append(slice[k%len(slice)], n)
		}
		for _, names := range slice {
			runs = append(runs, run{b, pm, names})
		}
	}
	outs := make([]results, len(runs))
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Go(func() {
			outs[i], errs[i] = runPackage(ctx, r.b, r.m, timeout, r.only)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s %s: %w", s.Name, r.b.Pkg, errs[i])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	all := results{}
	for _, rs := range outs {
		maps.Copy(all, rs)
	}
	return all, nil
}

// report logs the suite's numbers and its known failures; live says whether
// net/http's figures are of a run or of the recorded baseline.
func report(t *testing.T, s *suite, std, con results, v verdict, live bool) {
	count := func(rs results, top bool) (pass, total int) {
		for n, o := range rs {
			if top && strings.Contains(n, "/") {
				continue
			}
			if o.Action != "skip" {
				total++
			}
			if o.Action == "pass" {
				pass++
			}
		}
		return pass, total
	}
	sp, st := count(std, false)
	spTop, stTop := count(std, true)
	cp, ct := count(con, false)
	cpTop, ctTop := count(con, true)
	baseline := "recorded"
	if live {
		baseline = "run now"
	}
	t.Logf("%s %s@%s: net/http (%s) passes %d/%d tests (%d/%d top-level); connactor %d/%d (%d/%d top-level), "+
		"%d excluded as needing *http.Transport, %d run in neither; held to net/http: %d/%d pass, %d known failures",
		s.Name, s.Module, s.Version, baseline, sp, st, spTop, stTop, cp, ct, cpTop, ctTop,
		len(s.Excluded), len(s.Skipped), v.Passed, v.Compared, len(v.Expected))
	for _, n := range v.StdFails {
		t.Logf("%s: fails with net/http too, not compared: %s", s.Name, n)
	}
	for _, e := range v.Expected {
		t.Logf("%s: known failure: %s", s.Name, e)
	}
}

// saveResults writes both runs' outcomes (with each test's output) as JSON
// files into dir, for a closer look: CONNACTOR_DROPIN_OUT=dir.
func saveResults(t *testing.T, dir, name string, std, con results) {
	for m, rs := range map[string]results{"nethttp": std, "connactor": con} {
		b, err := json.MarshalIndent(rs, "", "  ")
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name+"-"+m+".json"), b, 0o644)
		}
		if err != nil {
			t.Errorf("CONNACTOR_DROPIN_OUT: %v", err)
		}
	}
}
