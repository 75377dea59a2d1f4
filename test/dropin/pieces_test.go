package dropin

import (
	"maps"
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
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"    --- FAIL: TestA/sub (0.50s)\n"}
{"Action":"fail","Package":"p","Test":"TestA/sub","Elapsed":0.5}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- FAIL: TestA (0.50s)\n"}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":0.5}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"skip","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Test":"TestC","Output":"panic: boom\n"}
{"Action":"run","Package":"p","Test":"TestD"}
{"Action":"output","Package":"p","Test":"TestD","Output":"panic: elsewhere\n"}
{"Action":"fail","Package":"p","Test":"TestD"}
{"Action":"output","Package":"p","Output":"FAIL\n"}
{"Action":"fail","Package":"p"}
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
		"sub:TestD":     {Action: "fail", Crashed: true},
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
	bin, err := buildTests(t.Context(), dir, ".", mode{Name: "test"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rs, err := runPackage(t.Context(), bin, mode{Name: "test", Skip: []string{"TestG"}}, time.Minute, nil)
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
	names, err := listTests(t.Context(), bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 7 || !names["TestA"] || !names["TestG"] {
		t.Errorf("listed: %v", names)
	}
	only, err := runPackage(t.Context(), bin, mode{Name: "test"}, time.Minute, []string{"TestE", "TestG"})
	if err != nil {
		t.Fatal(err)
	}
	if len(only) != 2 || only["TestE"] == nil || only["TestG"] == nil {
		t.Errorf("only TestE and TestG: got %v", only)
	}
}

func TestARecordedBaselineStandsForItsSuiteOnly(t *testing.T) {
	s := &suite{Name: "lib", Module: "example.com/lib", Version: "v1.2.3", Pkgs: []string{"."},
		Patches: []patch{{File: "a.go", Old: "f()", New: "g()", Count: 1}},
		Files:   injection("lib", "func pick() http.RoundTripper", "return nil", "return connactorTransport()"),
		Skipped: map[string]string{"TestNet": "internet"}}
	rec := newBaseline(s, results{"TestA": {Action: "pass"}, "TestA/x": {Action: "fail"}, "TestB": {Action: "skip"}})
	if why := rec.stale(s); why != "" {
		t.Fatalf("a fresh record is stale: %s", why)
	}
	if why := (*baseline)(nil).stale(s); why == "" {
		t.Error("no record stands for the suite")
	}
	for name, change := range map[string]func(s *suite){
		"a new release":       func(s *suite) { s.Version = "v1.2.4" },
		"another module":      func(s *suite) { s.Module = "example.com/other" },
		"another patch":       func(s *suite) { s.Patches[0].New = "h()" },
		"another package":     func(s *suite) { s.Pkgs = append(s.Pkgs, "./sub") },
		"shards":              func(s *suite) { s.Shards = 4 },
		"another skipped":     func(s *suite) { s.Skipped = map[string]string{"TestOther": "why"} },
		"net/http's injector": func(s *suite) { s.Files["connactor_dropin_off.go"] += "\n// changed\n" },
	} {
		changed := *s
		changed.Patches = slices.Clone(s.Patches)
		changed.Files = maps.Clone(s.Files)
		change(&changed)
		if rec.stale(&changed) == "" {
			t.Errorf("%s: the record still stands for the suite", name)
		}
	}
	// What connactor's side alone is built from is not net/http's baseline.
	same := *s
	same.Files = maps.Clone(s.Files)
	same.Files["connactor_dropin_on.go"] += "\n// changed\n"
	same.Files["connactor_dropin_client.go"] += "\n// changed\n"
	same.Excluded = map[string]string{"TestA": "needs *http.Transport"}
	same.KnownFailures = map[string]string{"TestB": "cause"}
	if why := rec.stale(&same); why != "" {
		t.Errorf("a change of connactor's side makes the record stale: %s", why)
	}
	otherGo := *rec
	otherGo.Go = "go1.1"
	if otherGo.stale(s) == "" {
		t.Error("a record of another Go release stands for this one")
	}

	rs := rec.results()
	if len(rs) != 3 || rs["TestA"].Action != "pass" || rs["TestA/x"].Action != "fail" || rs["TestB"].Action != "skip" {
		t.Errorf("results of the record: %v", rs)
	}
	if d := rec.diff(rs); len(d) != 0 {
		t.Errorf("the record differs from its own results: %q", d)
	}
	d := rec.diff(results{"TestA": {Action: "pass"}, "TestA/x": {Action: "pass"}, "TestC": {Action: "pass"}})
	want := []string{"TestA/x: recorded fail, net/http now pass", "TestB: recorded skip, net/http now absent",
		"TestC: recorded absent, net/http now pass"}
	if !slices.Equal(d, want) {
		t.Errorf("diff = %q, want %q", d, want)
	}
	if u := unrecorded(rs, results{"TestA": {Action: "pass"}, "TestZ": {Action: "pass"}}); !slices.Equal(u, []string{"TestZ"}) {
		t.Errorf("unrecorded = %q, want TestZ", u)
	}
}

func TestTheRecordedBaselinesStandForThePinnedSuites(t *testing.T) {
	for _, s := range suites {
		rec, err := loadBaseline(s)
		if err != nil {
			t.Fatal(err)
		}
		if why := rec.stale(s); why != "" {
			t.Errorf("%s: %s; %s", s.Name, why, recordHint(s))
			continue
		}
		pass := 0
		for _, v := range rec.Tests {
			if v == "pass" {
				pass++
			}
		}
		if pass == 0 {
			t.Errorf("%s: the recorded baseline passes no test", s.Name)
		}
	}
}
