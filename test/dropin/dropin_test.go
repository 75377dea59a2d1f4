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

// childTimeout is the -timeout of one go test run of a library's package:
// longer than any suite takes on a loaded 2-core machine, short enough that a
// request hanging for good costs minutes, not the whole CI job.
const childTimeout = 4 * time.Minute

func TestLibrariesOwnSuitesPassWithConnactorAsTheirTransport(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the connactor module root: %v", err)
	}
	for _, s := range suites {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			runSuite(t, s, root)
		})
	}
}

// runSuite runs s's tests with net/http and with connactor (at the same time:
// most of their time is the tests' own sleeps) and holds connactor to
// net/http's results.
func runSuite(t *testing.T, s *suite, root string) {
	ctx := t.Context()
	timeout := childTimeout
	if d, ok := t.Deadline(); ok {
		timeout = min(timeout, time.Until(d)-30*time.Second)
	}
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

	var stdRes, conRes results
	var stdErr, conErr error
	var wg sync.WaitGroup
	wg.Go(func() { stdRes, stdErr = runSuitePackages(ctx, s, dir, std, timeout, nil) })
	wg.Go(func() { conRes, conErr = runSuitePackages(ctx, s, dir, con, timeout, nil) })
	wg.Wait()
	if err := errors.Join(stdErr, conErr); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		// The -tags side of the injection point was never called.
		t.Fatalf("the connactor run never made a connactor client (the injection point is dead): %v", err)
	}
	checkSkipped(t, ctx, s, dir)

	// Both runs share the machine (and, in one library, a fixed port): what
	// failed is run once more alone before it counts, net/http's first.
	var again []string
	for _, n := range judge(s, stdRes, conRes).StdFails {
		again = append(again, topLevel(n))
	}
	slices.Sort(again)
	if again = slices.Compact(again); len(again) > 0 {
		t.Logf("%s: running again with net/http, alone: %s", s.Name, strings.Join(again, " "))
		rs, err := runSuitePackages(ctx, s, dir, std, timeout, again)
		if err != nil {
			t.Fatal(err)
		}
		stdRes = merge(stdRes, rs)
	}
	v := judge(s, stdRes, conRes)
	if len(v.Retry) > 0 {
		t.Logf("%s: running again with connactor, alone: %s", s.Name, strings.Join(v.Retry, " "))
		rs, err := runSuitePackages(ctx, s, dir, con, timeout, v.Retry)
		if err != nil {
			t.Fatal(err)
		}
		conRes = merge(conRes, rs)
		v = judge(s, stdRes, conRes)
	}
	if out := os.Getenv("CONNACTOR_DROPIN_OUT"); out != "" {
		saveResults(t, out, s.Name, stdRes, conRes)
	}
	report(t, s, stdRes, conRes, v)
	for _, p := range v.Problems {
		t.Error(p)
	}
}

// checkSkipped fails the test for an entry of s.Skipped that names no
// top-level test of the suite (-skip cannot tell).
func checkSkipped(t *testing.T, ctx context.Context, s *suite, dir string) {
	all := map[string]bool{}
	for _, pkg := range s.Pkgs {
		names, err := listTests(ctx, dir, pkg)
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

// runSuitePackages runs the suite's packages one after another in mode m; with
// only non-empty (prefixed top-level names), just those tests.
func runSuitePackages(ctx context.Context, s *suite, dir string, m mode, timeout time.Duration, only []string) (results, error) {
	all := results{}
	for _, pkg := range s.Pkgs {
		prefix := ""
		if pkg != "." {
			prefix = strings.TrimPrefix(pkg, "./") + ":"
		}
		var run []string
		for _, n := range only {
			if rest, ok := strings.CutPrefix(n, prefix); ok && !strings.Contains(rest, ":") {
				run = append(run, rest)
			}
		}
		if len(only) > 0 && len(run) == 0 {
			continue
		}
		pm := m
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
		rs, err := runPackage(ctx, dir, pkg, pm, timeout, run)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", s.Name, pkg, err)
		}
		for n, o := range rs {
			all[n] = o
		}
	}
	return all, nil
}

// report logs the suite's numbers and its known failures.
func report(t *testing.T, s *suite, std, con results, v verdict) {
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
	t.Logf("%s %s@%s: net/http passes %d/%d tests (%d/%d top-level); connactor %d/%d (%d/%d top-level), "+
		"%d excluded as needing *http.Transport, %d run in neither; held to net/http: %d/%d pass, %d known failures",
		s.Name, s.Module, s.Version, sp, st, spTop, stTop, cp, ct, cpTop, ctTop,
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
