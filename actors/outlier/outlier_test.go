package outlier

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

func TestPolicyDefaultsAndValidation(t *testing.T) {
	if got, want := (Policy{}).WithDefaults(), (Policy{ConsecutiveFailures: 5, MaxEjectedPercent: 50}); got != want {
		t.Fatalf("defaults = %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		p   Policy
		bad string
	}{
		{Policy{}, ""},
		{Policy{ConsecutiveFailures: 1, MaxEjectedPercent: 100}, ""},
		{Policy{ConsecutiveFailures: -1}, "ConsecutiveFailures"},
		{Policy{MaxEjectedPercent: 101}, "MaxEjectedPercent"},
		{Policy{MaxEjectedPercent: -5}, "MaxEjectedPercent"},
	} {
		err := tc.p.Validate()
		if (tc.bad == "") != (err == nil) || (err != nil && (!errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), tc.bad))) {
			t.Errorf("Validate(%+v) = %v, want an error naming %q", tc.p, err, tc.bad)
		}
	}
}

func TestCounterEjectsAfterARunOfFailures(t *testing.T) {
	p := Policy{ConsecutiveFailures: 3}.WithDefaults()
	type rec struct{ failed, ejected, eject bool }
	F, S := rec{failed: true}, rec{}
	E := rec{failed: true, eject: true}
	for _, tc := range []struct {
		name  string
		steps []rec
	}{
		{"three failures in a row eject", []rec{F, F, E}},
		{"a success ends the run", []rec{F, F, S, F, F, E}},
		{"the run starts again after an ejection", []rec{F, F, E, F, F, E}},
		{"failures while ejected do not count", []rec{F, F,
			{failed: true, ejected: true}, {failed: true, ejected: true}, {failed: true, ejected: true}, F, F, E}},
		{"an ejection clears a run begun before it", []rec{F, F, {ejected: true}, F, F, E}},
		{"successes never eject", []rec{S, S, S, S}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Counter
			for i, r := range tc.steps {
				if got := c.Record(p, r.failed, r.ejected); got != r.eject {
					t.Fatalf("step %d (failed %v, ejected %v): eject = %v, want %v (run %d)", i, r.failed, r.ejected, got, r.eject, c.Run())
				}
			}
		})
	}
}

func TestMaxEjectedKeepsOneEndpointServing(t *testing.T) {
	for _, tc := range []struct{ percent, total, want int }{
		{50, 0, 0}, {50, 1, 0}, {50, 2, 1}, {50, 3, 1}, {50, 4, 2}, {50, 10, 5},
		{10, 3, 1}, {10, 20, 2}, {100, 3, 2}, {100, 1, 0}, {1, 100, 1}, {99, 100, 99},
	} {
		if got := (Policy{MaxEjectedPercent: tc.percent}).MaxEjected(tc.total); got != tc.want {
			t.Errorf("%d%% of %d: MaxEjected = %d, want %d", tc.percent, tc.total, got, tc.want)
		}
	}
}

// ep is a route's view of one endpoint, for Cutoff.
type ep struct {
	name      string
	at, until time.Time
}

func TestCutoffLetsTheLeastRecentlyEjectedServe(t *testing.T) {
	s := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	ejectedAt := func(name string, at, until int) ep { return ep{name, s(at), s(until)} }
	up := func(name string) ep { return ep{name: name} }
	for _, tc := range []struct {
		name    string
		percent int
		now     int
		eps     []ep
		held    string // the names held out at now
	}{
		{"none ejected", 50, 10, []ep{up("a"), up("b"), up("c")}, ""},
		{"one of three within 50%", 50, 10, []ep{ejectedAt("a", 9, 11), up("b"), up("c")}, "a"},
		{"two of three past 50%: the later is held", 50, 10,
			[]ep{ejectedAt("a", 8, 11), ejectedAt("b", 9, 12), up("c")}, "b"},
		{"all three ejected, 50%: the latest is held", 50, 10,
			[]ep{ejectedAt("a", 9, 12), ejectedAt("b", 7, 11), ejectedAt("c", 8, 13)}, "a"},
		{"all three ejected, 100%: the least recent serves", 100, 10,
			[]ep{ejectedAt("a", 9, 12), ejectedAt("b", 7, 11), ejectedAt("c", 8, 13)}, "ac"},
		{"a back-off that ended does not count", 50, 10,
			[]ep{ejectedAt("a", 1, 3), ejectedAt("b", 9, 12), up("c")}, "b"},
		{"one endpoint alone always serves", 50, 10, []ep{ejectedAt("a", 9, 12)}, ""},
		{"ten endpoints at 50%: the five latest are held", 50, 20, []ep{
			ejectedAt("a", 10, 30), ejectedAt("b", 11, 30), ejectedAt("c", 12, 30), ejectedAt("d", 13, 30),
			ejectedAt("e", 14, 30), ejectedAt("f", 15, 30), ejectedAt("g", 16, 30), up("h"), up("i"), up("j")}, "cdefg"},
		{"ejections at the same instant are held together", 50, 10,
			[]ep{ejectedAt("a", 9, 12), ejectedAt("b", 9, 12), ejectedAt("c", 5, 12), up("d")}, "ab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Policy{MaxEjectedPercent: tc.percent}.WithDefaults()
			now := s(tc.now)
			view := func(e ep) (time.Time, time.Time) { return e.at, e.until }
			cut := Cutoff(p, now, tc.eps, view)
			held := ""
			for _, e := range tc.eps {
				if Held(cut, now, e.at, e.until) {
					held += e.name
				}
			}
			if held != tc.held {
				t.Fatalf("held out: %q, want %q (cutoff %v)", held, tc.held, cut)
			}
		})
	}
}

func TestCutoffAllocatesNothing(t *testing.T) {
	eps := []ep{{"a", t0, t0.Add(time.Second)}, {"b", t0.Add(time.Millisecond), t0.Add(time.Second)}, {name: "c"}}
	view := func(e ep) (time.Time, time.Time) { return e.at, e.until }
	p := Policy{}.WithDefaults()
	if n := testing.AllocsPerRun(100, func() { Cutoff(p, t0.Add(time.Millisecond), eps, view) }); n != 0 {
		t.Fatalf("Cutoff allocates %v times", n)
	}
}
