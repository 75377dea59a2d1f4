package dropin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// suite is one library whose own tests run with connactor as the transport
// its clients are built on, held to their results with net/http (recorded, or
// run beside).
type suite struct {
	Name    string   // short name: the subtest's
	Module  string   // module path
	Version string   // the pinned release (a new one is a deliberate change here, and a new baseline)
	Pkgs    []string // packages whose tests run, relative to the module root
	// Shards is how many processes run each package's tests at once, each an
	// interleaved slice of its top-level tests (0 or 1: one process). Only
	// for a suite whose verdicts are the same either way: tests that depend
	// on state an earlier test left in the process fail in a shard without it.
	Shards  int
	Patches []patch // edits to the library's source: the injection point
	// Files are added to the module (relative path -> content): the injection
	// point's two implementations, one built with the connactor_dropin tag and
	// one without.
	Files map[string]string
	// Excluded tests need a *http.Transport by type (a type assertion, or a
	// Transport field set or read): test name -> why. They run with net/http
	// only (a -skip in the connactor run, so that a nil dereference there
	// cannot end the run).
	Excluded map[string]string
	// Skipped tests run in neither mode: test name -> why (traffic beyond
	// 127.0.0.1, which no test of this repository sends).
	Skipped map[string]string
	// KnownFailures are the tests connactor fails today: test name -> root
	// cause and what fixes it. The run fails when a test outside this list
	// fails, and when a listed test passes: remove it then.
	KnownFailures map[string]string
}

// patch replaces Old by New in File, which must hold Old exactly Count times:
// a release that moved the code fails loudly instead of silently testing
// net/http twice.
type patch struct {
	File     string
	Old, New string
	Count    int
}

// tagConnactor is the build tag of the connactor side of the injection point.
const tagConnactor = "connactor_dropin"

// markerEnv names a file the connactor side creates when it builds its first
// client: the proof that the suite really ran on connactor.
const markerEnv = "CONNACTOR_DROPIN_MARKER"

// outcome is one test's result in one mode.
type outcome struct {
	Action  string // "pass", "fail" or "skip"
	Crashed bool   // no result: the test binary exited while it ran (panic elsewhere, -timeout)
	Elapsed float64
	Output  []string // the test's own output lines
}

// results are a package's (or a suite's) outcomes by test name; subtests are
// named Parent/Sub as go test names them; tests of packages other than the
// module root are prefixed with the package's directory and a colon.
type results map[string]*outcome

// goEnv is the environment of every child go command: no workspace, no
// toolchain switch, and otherwise what the test itself got.
func goEnv(extra ...string) []string {
	env := append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local")
	return append(env, extra...)
}

// goCmd runs go with args in dir and returns its combined output.
func goCmd(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, tail(out, 40))
	}
	return out, nil
}

// networkError is a failure of a step that needs the module proxy (or the
// module cache it fills): the only failure that may skip the test, outside CI.
type networkError struct{ err error }

func (e *networkError) Error() string { return e.err.Error() }
func (e *networkError) Unwrap() error { return e.err }

// prepare builds the suite's module in a fresh directory under tmp: the
// pinned release copied from the module cache, patched, with the injection
// files added and github.com/connactor/connactor replaced by root.
func prepare(ctx context.Context, s *suite, root, tmp string) (string, error) {
	out, err := goCmd(ctx, tmp, goEnv(), "mod", "download", "-json", s.Module+"@"+s.Version)
	if err != nil {
		return "", &networkError{err}
	}
	var dl struct{ Dir, Error string }
	if err := json.Unmarshal(out, &dl); err != nil || dl.Dir == "" {
		return "", &networkError{fmt.Errorf("go mod download %s@%s: %q %v", s.Module, s.Version, dl.Error, err)}
	}
	dir := filepath.Join(tmp, s.Name)
	if err := copyTree(dl.Dir, dir); err != nil {
		return "", err
	}
	for _, p := range s.Patches {
		if err := p.apply(dir); err != nil {
			return "", err
		}
	}
	for name, text := range s.Files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return "", err
		}
	}
	const mod = "github.com/connactor/connactor"
	if _, err := goCmd(ctx, dir, goEnv(), "mod", "edit",
		"-require="+mod+"@v0.0.0-00010101000000-000000000000", "-replace="+mod+"="+root); err != nil {
		return "", err
	}
	if _, err := goCmd(ctx, dir, goEnv(), "mod", "tidy"); err != nil {
		return "", &networkError{err}
	}
	return dir, nil
}

func (p patch) apply(dir string) error {
	name := filepath.Join(dir, p.File)
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	if n := bytes.Count(b, []byte(p.Old)); n != p.Count {
		return fmt.Errorf("patch %s: %q occurs %d times, want %d (has the pinned release changed?)", p.File, p.Old, n, p.Count)
	}
	return os.WriteFile(name, bytes.ReplaceAll(b, []byte(p.Old), []byte(p.New)), 0o644)
}

// copyTree copies the module cache's read-only tree src to dst, writable.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}

// mode is one of the two ways a suite runs.
type mode struct {
	Name string   // "net/http" or "connactor"
	Tags string   // build tags
	Env  []string // extra environment
	Skip []string // top-level tests not run in this mode
}

// testBinary is one package's test binary, built once for a mode and run as
// often as its tests need: the main run, the runs after a crash, the reruns
// of what failed, and the list of its tests.
type testBinary struct {
	Path string // the binary
	Dir  string // the package's directory: go test runs a test binary there
	Pkg  string // the package, relative to the module root ("." or "./sub")
}

// buildTests builds package pkg's test binary (relative to the module at dir)
// in mode m into out.
func buildTests(ctx context.Context, dir, pkg string, m mode, out string) (*testBinary, error) {
	bin := filepath.Join(out, strings.NewReplacer("/", "_", ".", "_").Replace(pkg)+"-"+strings.ReplaceAll(m.Name, "/", "")+".test")
	// -vet=off: the go directive tidy raised turns on vet checks the
	// libraries' releases predate (non-constant format strings).
	args := []string{"test", "-c", "-vet=off", "-o", bin}
	if m.Tags != "" {
		args = append(args, "-tags="+m.Tags)
	}
	if _, err := goCmd(ctx, dir, goEnv(), append(args, pkg)...); err != nil {
		return nil, fmt.Errorf("%s: %w", m.Name, err)
	}
	return &testBinary{Path: bin, Dir: filepath.Join(dir, pkg), Pkg: pkg}, nil
}

// prefix is what results put before the names of the package's tests.
func (b *testBinary) prefix() string {
	if b.Pkg == "." {
		return ""
	}
	return strings.TrimPrefix(b.Pkg, "./") + ":"
}

// maxRuns bounds the invocations of one package's tests: each one after the
// first runs only the tests a crashed binary left unrun.
const maxRuns = 20

// runPackage runs the tests of b in mode m and returns their outcomes. When
// the test binary dies (a panic, its -timeout), the tests it was running are
// recorded as crashed and the tests it had not started yet run in another
// invocation. With only non-empty, just those top-level tests run.
func runPackage(ctx context.Context, b *testBinary, m mode, timeout time.Duration, only []string) (results, error) {
	all := results{}
	done := map[string]bool{}
	prefix := b.prefix()
	for range maxRuns {
		// What go test -json does: the binary's verbose output through test2json
		// (-t: with times, and so with each test's Elapsed).
		args := []string{"tool", "test2json", "-t", "-p", b.Pkg, b.Path, "-test.v=test2json", "-test.count=1",
			"-test.timeout=" + timeout.String()}
		if len(only) > 0 {
			args = append(args, "-test.run="+anyOf(only))
		}
		skip := slices.Concat(m.Skip, slices.Sorted(maps.Keys(done)))
		if len(skip) > 0 {
			args = append(args, "-test.skip="+anyOf(skip))
		}
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = b.Dir
		cmd.Env = goEnv(m.Env...)
		cmd.WaitDelay = 10 * time.Second
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return nil, fmt.Errorf("%s: go %s: %w", m.Name, strings.Join(args, " "), err)
		}
		rs, pkgOut, perr := parseTestJSON(bytes.NewReader(stdout), prefix)
		if perr != nil {
			return nil, fmt.Errorf("%s: go %s: %w\n%s", m.Name, strings.Join(args, " "), perr, tail(stderr.Bytes(), 20))
		}
		if len(rs) == 0 && exit != nil && len(done) == 0 {
			// Nothing ran and the binary failed: not a test's failure.
			return nil, fmt.Errorf("%s: go %s: %w\n%s%s", m.Name, strings.Join(args, " "), err,
				tail(stderr.Bytes(), 40), strings.Join(lastN(pkgOut, 40), ""))
		}
		fresh := 0
		for name, o := range rs {
			all[name] = o
			if top, _, sub := strings.Cut(strings.TrimPrefix(name, prefix), "/"); !sub && !done[top] {
				done[top] = true
				fresh++
			}
		}
		if exit == nil || fresh == 0 || ctx.Err() != nil {
			break
		}
	}
	return all, ctx.Err()
}

// testName matches the lines of a test binary's -test.list that name a test.
var testName = regexp.MustCompile(`^(Test|Example|Fuzz|Benchmark)[\p{L}\p{N}_]*$`)

// listTests returns the top-level tests (examples, fuzz tests and benchmarks
// included) of b, named as results name them.
func listTests(ctx context.Context, b *testBinary) (map[string]bool, error) {
	cmd := exec.CommandContext(ctx, b.Path, "-test.list=.")
	cmd.Dir = b.Dir
	cmd.Env = goEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s -test.list: %w\n%s", b.Path, err, tail(out, 20))
	}
	names := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		if line = strings.TrimSpace(line); testName.MatchString(line) {
			names[b.prefix()+line] = true
		}
	}
	return names, nil
}

// parseTestJSON reads test2json's output. Tests are named with prefix
// prepended. A test that started and has no result, or whose failure testing
// never reported (no "--- FAIL" line: test2json fails the test a binary died
// in), is recorded as a crashed failure. It also returns the package's own
// output lines.
func parseTestJSON(r io.Reader, prefix string) (results, []string, error) {
	rs := results{}
	reported := map[*outcome]bool{}
	var pkgOut []string
	dec := json.NewDecoder(r)
	for {
		var ev struct {
			Action, Test, Output string
			Elapsed              float64
		}
		if err := dec.Decode(&ev); err == io.EOF {
			break
		} else if err != nil {
			return nil, nil, err
		}
		if ev.Test == "" {
			if ev.Action == "output" || ev.Action == "build-output" {
				pkgOut = append(pkgOut, ev.Output)
			}
			continue
		}
		name := prefix + ev.Test
		o := rs[name]
		if o == nil {
			o = &outcome{}
			rs[name] = o
		}
		switch ev.Action {
		case "output":
			o.Output = append(o.Output, ev.Output)
			if strings.HasPrefix(strings.TrimLeft(ev.Output, " "), "--- FAIL: ") {
				reported[o] = true
			}
		case "pass", "fail", "skip":
			o.Action, o.Elapsed = ev.Action, ev.Elapsed
		}
	}
	for _, o := range rs {
		if o.Action == "" || o.Action == "fail" && !reported[o] {
			o.Action, o.Crashed = "fail", true
		}
	}
	return rs, pkgOut, nil
}

// anyOf is a -run/-skip pattern matching exactly the top-level tests names.
func anyOf(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = regexp.QuoteMeta(n)
	}
	return "^(" + strings.Join(q, "|") + ")$"
}

func lastN(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

func tail(b []byte, n int) string {
	lines := strings.SplitAfter(string(b), "\n")
	return strings.Join(lastN(lines, n), "")
}
