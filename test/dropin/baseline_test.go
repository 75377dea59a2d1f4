package dropin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// The net/http run of a suite is its baseline: the tests connactor is held
// to. For a pinned release, a Go release and the same patches it gives the
// same verdicts every time, so it is recorded in testdata once and the test
// runs only the connactor side. The net/http side runs again when what the
// record was made from differs (a new release pinned, a new Go release, other
// patches; the test then fails and says how to record it anew), or when asked:
//
//	go test ./test/dropin -dropin.baseline=check   # run it and compare with the record
//	go test ./test/dropin -dropin.baseline=record  # run it and write the record
//
// (or CONNACTOR_DROPIN_BASELINE=check|record; `make dropin-baseline` checks,
// `make dropin-baseline DROPIN_BASELINE=record` records).
var baselineFlag = flag.String("dropin.baseline", "",
	"check: run each suite with net/http too and compare with the recorded baseline; "+
		"record: run it and write the baseline to testdata (default $"+baselineEnv+")")

// baselineEnv is the flag's environment variable, for runs where a flag
// cannot be passed to this package alone (go test ./...).
const baselineEnv = "CONNACTOR_DROPIN_BASELINE"

// The ways the baseline is used.
const (
	baselineRecorded = ""       // the record, when it matches the suite
	baselineCheck    = "check"  // a net/http run, compared with the record
	baselineRecord   = "record" // a net/http run, written as the record
)

// baselineMode returns what -dropin.baseline (or its environment variable)
// asks for.
func baselineMode() (string, error) {
	m := *baselineFlag
	if m == "" {
		m = os.Getenv(baselineEnv)
	}
	switch m {
	case baselineRecorded, baselineCheck, baselineRecord:
		return m, nil
	}
	return "", fmt.Errorf("-dropin.baseline (or %s) is %q: want check or record", baselineEnv, m)
}

// baseline is a suite's net/http verdicts with what they were made from.
type baseline struct {
	Module  string `json:"module"`
	Version string `json:"version"`
	// Go is the Go release (major and minor) whose net/http ran the suite.
	Go string `json:"go"`
	// Recipe is a hash of the rest of what the net/http run depends on: the
	// packages run and their shards, the patches, the tests run in neither
	// mode and the net/http side of the injection point.
	Recipe string `json:"recipe"`
	// Tests are the verdicts by test name (as results name them): "pass",
	// "fail" or "skip".
	Tests map[string]string `json:"tests"`
}

// baselinePath is where s's baseline is recorded, relative to the package.
func baselinePath(s *suite) string {
	return filepath.Join("testdata", "baseline-"+s.Name+".json")
}

// goRelease is the Go release of the toolchain that runs the suites (the
// children run with GOTOOLCHAIN=local: the same go command), without its
// patch number.
func goRelease() string {
	v := runtime.Version()
	if parts := strings.SplitN(v, ".", 3); len(parts) == 3 {
		return parts[0] + "." + parts[1]
	}
	return v
}

// recipe hashes what, besides the release and Go, decides s's net/http
// verdicts.
func recipe(s *suite) string {
	var netHTTPFiles []string
	for _, name := range slices.Sorted(maps.Keys(s.Files)) {
		if !strings.HasPrefix(s.Files[name], "//go:build "+tagConnactor+"\n") {
			netHTTPFiles = append(netHTTPFiles, name, s.Files[name])
		}
	}
	b, err := json.Marshal(struct {
		Pkgs    []string
		Shards  int
		Patches []patch
		Skipped []string
		Files   []string
	}{s.Pkgs, max(s.Shards, 1), s.Patches, slices.Sorted(maps.Keys(s.Skipped)), netHTTPFiles})
	if err != nil {
		panic("dropin: internal error: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// newBaseline is the record of the net/http results rs of s.
func newBaseline(s *suite, rs results) *baseline {
	b := &baseline{Module: s.Module, Version: s.Version, Go: goRelease(), Recipe: recipe(s), Tests: map[string]string{}}
	for name, o := range rs {
		b.Tests[name] = o.Action
	}
	return b
}

// loadBaseline reads s's recorded baseline; nil when there is none.
func loadBaseline(s *suite) (*baseline, error) {
	data, err := os.ReadFile(baselinePath(s))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var b baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("%s: %w", baselinePath(s), err)
	}
	return &b, nil
}

// save writes b as s's recorded baseline.
func (b *baseline) save(s *suite) error {
	data, err := json.MarshalIndent(b, "", "\t")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(baselinePath(s)), 0o755); err != nil {
		return err
	}
	return os.WriteFile(baselinePath(s), append(data, '\n'), 0o644)
}

// stale says why b cannot stand for s's net/http run today, or "" when it can.
func (b *baseline) stale(s *suite) string {
	want := newBaseline(s, nil)
	switch {
	case b == nil:
		return "no baseline is recorded"
	case b.Module != want.Module || b.Version != want.Version:
		return fmt.Sprintf("the baseline is recorded for %s@%s, the suite pins %s@%s", b.Module, b.Version, want.Module, want.Version)
	case b.Go != want.Go:
		return fmt.Sprintf("the baseline is recorded with %s's net/http, this is %s", b.Go, want.Go)
	case b.Recipe != want.Recipe:
		return fmt.Sprintf("the baseline is recorded for other packages, patches, skipped tests or injection (recipe %s, now %s)",
			b.Recipe, want.Recipe)
	}
	return ""
}

// results are the recorded verdicts as the net/http run's outcomes.
func (b *baseline) results() results {
	rs := results{}
	for name, action := range b.Tests {
		rs[name] = &outcome{Action: action}
	}
	return rs
}

// diff lists the tests whose verdicts differ between b and the net/http run rs.
func (b *baseline) diff(rs results) []string {
	var out []string
	names := map[string]bool{}
	for n := range b.Tests {
		names[n] = true
	}
	for n := range rs {
		names[n] = true
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		was, now := b.Tests[n], ""
		if o := rs[n]; o != nil {
			now = o.Action
		}
		if was != now {
			out = append(out, fmt.Sprintf("%s: recorded %s, net/http now %s", n, orNone(was), orNone(now)))
		}
	}
	return out
}

func orNone(action string) string {
	if action == "" {
		return "absent"
	}
	return action
}

// unrecorded lists the tests of the connactor run con that the baseline
// does not name: a record that does not match the suite it stands for.
func unrecorded(std, con results) []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(con)) {
		if std[n] == nil {
			out = append(out, n)
		}
	}
	return out
}
