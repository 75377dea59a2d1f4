package dropin

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// verdict compares a suite's connactor run with its net/http run.
type verdict struct {
	Problems []string // each one fails the test
	Expected []string // known failures that failed, with their cause
	Retry    []string // top-level tests (prefixed) behind the problems that a rerun may clear
	StdFails []string // tests net/http fails too: not compared
	Compared int      // tests (subtests included) net/http passes and connactor is held to
	Passed   int      // of those, the ones connactor passes
}

// topLevel returns the top-level test of name (prefix kept).
func topLevel(name string) string {
	top, _, _ := strings.Cut(name, "/")
	return top
}

// listed reports whether name or one of its parents is a key of m.
func listed[V any](m map[string]V, name string) bool {
	for n := name; ; {
		if _, ok := m[n]; ok {
			return true
		}
		i := strings.LastIndexByte(n, '/')
		if i < 0 {
			return false
		}
		n = n[:i]
	}
}

// failedChild reports whether a subtest of name failed in rs: name's own
// failure is then explained by it (the subtest is the one to list).
func failedChild(rs results, name string) bool {
	for n, o := range rs {
		if o.Action == "fail" && strings.HasPrefix(n, name+"/") {
			return true
		}
	}
	return false
}

// judge holds the connactor run con to the net/http run std under the suite's
// exclusions and known failures.
func judge(s *suite, std, con results) verdict {
	var v verdict
	for _, name := range slices.Sorted(maps.Keys(std)) {
		base := std[name]
		if base.Action != "pass" {
			if base.Action == "fail" {
				v.StdFails = append(v.StdFails, name)
			}
			continue
		}
		if listed(s.Excluded, name) {
			continue
		}
		v.Compared++
		cause, known := s.KnownFailures[name]
		c := con[name]
		switch {
		case c == nil && known:
			v.Expected = append(v.Expected, fmt.Sprintf("%s: did not run (%s)", name, cause))
		case c == nil:
			v.Problems = append(v.Problems, name+": passes with net/http, did not run with connactor")
			v.Retry = append(v.Retry, topLevel(name))
		case c.Action == "pass" && known:
			v.Passed++
			v.Problems = append(v.Problems, name+": passes with connactor now: remove it from KnownFailures")
			v.Retry = append(v.Retry, topLevel(name))
		case c.Action == "pass":
			v.Passed++
		case known:
			v.Expected = append(v.Expected, name+": "+cause)
		case c.Action == "fail" && failedChild(con, name):
			v.Compared-- // explained by its failed subtests, judged on their own
		default:
			what := "fails"
			if c.Action == "skip" {
				what = "is skipped"
			} else if c.Crashed {
				what = "crashed (no result: the test binary died while it ran)"
			}
			p := fmt.Sprintf("%s: passes with net/http, %s with connactor", name, what)
			if out := strings.TrimRight(strings.Join(lastN(c.Output, 25), ""), "\n"); out != "" {
				p += "\n\t" + strings.ReplaceAll(out, "\n", "\n\t")
			}
			v.Problems = append(v.Problems, p)
			v.Retry = append(v.Retry, topLevel(name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.KnownFailures)) {
		if std[name] == nil {
			v.Problems = append(v.Problems, name+": listed in KnownFailures but no such test ran")
		} else if listed(s.Excluded, name) {
			v.Problems = append(v.Problems, name+": listed in both KnownFailures and Excluded")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Excluded)) {
		if std[name] == nil {
			v.Problems = append(v.Problems, name+": listed in Excluded but no such test ran")
		}
	}
	slices.Sort(v.Retry)
	v.Retry = slices.Compact(v.Retry)
	return v
}

// merge replaces, in rs, every outcome of the top-level tests that again ran
// by its outcome in again.
func merge(rs, again results) results {
	out := results{}
	rerun := map[string]bool{}
	for n := range again {
		rerun[topLevel(n)] = true
	}
	for n, o := range rs {
		if !rerun[topLevel(n)] {
			out[n] = o
		}
	}
	for n, o := range again {
		out[n] = o
	}
	return out
}
