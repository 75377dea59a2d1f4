package dropin

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseTestJSONRecordsOutcomesAndTestsTheBinaryDiedIn(t *testing.T) {
	in := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"run","Package":"p","Test":"TestA/sub"}
{"Action":"fail","Package":"p","Test":"TestA/sub","Elapsed":0.5}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":0.5}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"skip","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Test":"TestC","Output":"panic: boom\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t1.0s\n"}
{"Action":"fail","Package":"p","Elapsed":1}
`
	rs, pkgOut, err := parseTestJSON(strings.NewReader(in), "sub:")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]outcome{
		"sub:TestA":     {Action: "fail", Elapsed: 0.5},
		"sub:TestA/sub": {Action: "fail", Elapsed: 0.5},
		"sub:TestB":     {Action: "skip"},
		"sub:TestC":     {Action: "fail", Crashed: true},
	}
	if len(rs) != len(want) {
		t.Fatalf("got %d tests, want %d: %v", len(rs), len(want), rs)
	}
	for name, w := range want {
		o := rs[name]
		if o == nil || o.Action != w.Action || o.Crashed != w.Crashed || o.Elapsed != w.Elapsed {
			t.Errorf("%s = %+v, want %+v", name, o, w)
		}
	}
	if got := strings.Join(rs["sub:TestC"].Output, ""); got != "panic: boom\n" {
		t.Errorf("TestC's output = %q", got)
	}
	if len(pkgOut) != 1 || !strings.HasPrefix(pkgOut[0], "FAIL") {
		t.Errorf("package output = %q", pkgOut)
	}
}

func TestJudgeHoldsConnactorToNetHTTPUnderTheLists(t *testing.T) {
	pass := func() *outcome { return &outcome{Action: "pass"} }
	fail := func() *outcome { return &outcome{Action: "fail"} }
	for _, c := range []struct {
		name         string
		std, con     results
		excluded     map[string]string
		known        map[string]string
		problems     []string // prefixes of the problems, in order
		retry        []string
		expected     int
		stdFails     int
		compared, ok int
	}{
		{name: "both pass", std: results{"TestA": pass()}, con: results{"TestA": pass()}, compared: 1, ok: 1},
		{name: "net/http fails too: not compared",
			std: results{"TestA": fail()}, con: results{"TestA": fail()}, stdFails: 1},
		{name: "a new failure", std: results{"TestA": pass(), "TestA/x": pass()},
			con:      results{"TestA": fail(), "TestA/x": fail()},
			problems: []string{"TestA/x: passes with net/http, fails"}, retry: []string{"TestA"}, compared: 1},
		{name: "a known failure", std: results{"TestA": pass()}, con: results{"TestA": fail()},
			known: map[string]string{"TestA": "cause"}, expected: 1, compared: 1},
		{name: "a known failure that passes now", std: results{"TestA": pass()}, con: results{"TestA": pass()},
			known:    map[string]string{"TestA": "cause"},
			problems: []string{"TestA: passes with connactor now"}, retry: []string{"TestA"}, compared: 1, ok: 1},
		{name: "an excluded subtest explains its parent",
			std:      results{"TestA": pass(), "TestA/x": pass(), "TestA/y": pass()},
			con:      results{"TestA": fail(), "TestA/x": fail(), "TestA/y": pass()},
			excluded: map[string]string{"TestA/x": "needs *http.Transport"}, compared: 1, ok: 1},
		{name: "an excluded test is not run with connactor",
			std: results{"TestA": pass()}, con: results{}, excluded: map[string]string{"TestA": "why"}},
		{name: "skipped or missing with connactor", std: results{"TestA": pass(), "TestB": pass()},
			con:      results{"TestA": {Action: "skip"}},
			problems: []string{"TestA: passes with net/http, is skipped", "TestB: passes with net/http, did not run"},
			retry:    []string{"TestA", "TestB"}, compared: 2},
		{name: "stale lists", std: results{"TestA": pass()}, con: results{"TestA": pass()},
			known: map[string]string{"TestGone": "cause"}, excluded: map[string]string{"TestAlsoGone": "why"},
			problems: []string{"TestGone: listed in KnownFailures but no such test ran",
				"TestAlsoGone: listed in Excluded but no such test ran"}, compared: 1, ok: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &suite{Excluded: c.excluded, KnownFailures: c.known}
			v := judge(s, c.std, c.con)
			if len(v.Problems) != len(c.problems) {
				t.Fatalf("problems = %q, want %q", v.Problems, c.problems)
			}
			for i, p := range c.problems {
				if !strings.HasPrefix(v.Problems[i], p) {
					t.Errorf("problem %d = %q, want it to start with %q", i, v.Problems[i], p)
				}
			}
			if !slices.Equal(v.Retry, c.retry) || len(v.Expected) != c.expected || len(v.StdFails) != c.stdFails ||
				v.Compared != c.compared || v.Passed != c.ok {
				t.Errorf("verdict = %+v", v)
			}
		})
	}
}

func TestMergeReplacesWholeTopLevelTestsThatRanAgain(t *testing.T) {
	rs := results{"TestA": {Action: "fail"}, "TestA/x": {Action: "fail"}, "TestA/y": {Action: "pass"},
		"TestB": {Action: "fail"}}
	got := merge(rs, results{"TestA": {Action: "pass"}, "TestA/x": {Action: "pass"}})
	want := map[string]string{"TestA": "pass", "TestA/x": "pass", "TestB": "fail"}
	if len(got) != len(want) {
		t.Fatalf("merged = %v", got)
	}
	for n, a := range want {
		if got[n] == nil || got[n].Action != a {
			t.Errorf("%s = %+v, want %s", n, got[n], a)
		}
	}
}

func TestPatchRefusesASourceThatMoved(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("x := f()\ny := f()\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := (patch{File: "a.go", Old: "f()", New: "g()", Count: 1}).apply(dir); err == nil {
		t.Fatal("a patch applied where its text occurs twice, not once")
	}
	if err := (patch{File: "a.go", Old: "f()", New: "g()", Count: 2}).apply(dir); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "a.go"))
	if string(b) != "x := g()\ny := g()\n" {
		t.Fatalf("patched: %q", b)
	}
}

// A tiny module whose test binary dies twice: once in a test's own panic
// (testing reports it as failed) and once in a panic on another goroutine
// (no result at all). Every test after each death still runs.
func TestRunPackageRunsWhatACrashedTestBinaryLeftUnrun(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/crash\n\ngo 1.26\n",
		"crash_test.go": `package crash

import "testing"

func TestA(t *testing.T) {}
func TestB(t *testing.T) { panic("in the test") }
func TestC(t *testing.T) { t.Run("sub", func(t *testing.T) {}) }
func TestD(t *testing.T) {
	go panic("elsewhere")
	select {}
}
func TestE(t *testing.T) {}
func TestF(t *testing.T) { t.Fatal("plain failure") }
func TestG(t *testing.T) {}
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := runPackage(t.Context(), dir, ".", mode{Name: "test", Skip: []string{"TestG"}}, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]outcome{
		"TestA": {Action: "pass"}, "TestB": {Action: "fail"}, "TestC": {Action: "pass"},
		"TestC/sub": {Action: "pass"}, "TestD": {Action: "fail", Crashed: true}, "TestE": {Action: "pass"},
		"TestF": {Action: "fail"},
	}
	if len(rs) != len(want) {
		t.Errorf("got %d tests, want %d", len(rs), len(want))
	}
	for name, w := range want {
		if o := rs[name]; o == nil || o.Action != w.Action || o.Crashed != w.Crashed {
			t.Errorf("%s = %+v, want %+v", name, o, w)
		}
	}
	names, err := listTests(t.Context(), dir, ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 7 || !names["TestA"] || !names["TestG"] {
		t.Errorf("listed: %v", names)
	}
	only, err := runPackage(t.Context(), dir, ".", mode{Name: "test"}, time.Minute, []string{"TestE", "TestG"})
	if err != nil {
		t.Fatal(err)
	}
	if len(only) != 2 || only["TestE"] == nil || only["TestG"] == nil {
		t.Errorf("only TestE and TestG: got %v", only)
	}
}
