package outlier_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/connactor/connactor/actors/outlier"
)

// endpoint is a route's entry for one address, as the route would keep it:
// the outlier run next to the one ejection state (the dial back-off).
type endpoint struct {
	name      string
	run       outlier.Counter
	ejectedAt time.Time
	until     time.Time
	backoff   time.Duration
}

// How a route uses the rule: each exchange's outcome goes to the endpoint's
// counter; an ejection goes into the same back-off as a failed dial (1 s
// doubling, without jitter here); Cutoff says who serves.
func Example() {
	p := outlier.Policy{ConsecutiveFailures: 2}.WithDefaults() // at most 50%: one of three
	start := time.Unix(0, 0)
	now := start
	eps := []*endpoint{{name: "a"}, {name: "b"}, {name: "c"}}
	a, b, c := eps[0], eps[1], eps[2]

	record := func(e *endpoint, failed bool) {
		if e.run.Record(p, failed, now.Before(e.until)) {
			d := max(e.backoff, time.Second)
			e.ejectedAt, e.until, e.backoff = now, now.Add(d), min(2*d, 30*time.Second)
			fmt.Printf("%v: %s ejected until %v\n", now.Sub(start), e.name, e.until.Sub(start))
		}
	}
	serving := func() {
		cut := outlier.Cutoff(p, now, eps, func(e *endpoint) (time.Time, time.Time) { return e.ejectedAt, e.until })
		var names []string
		for _, e := range eps {
			if !outlier.Held(cut, now, e.ejectedAt, e.until) {
				names = append(names, e.name)
			}
		}
		fmt.Printf("%v: serving %s\n", now.Sub(start), strings.Join(names, " "))
	}

	record(b, true)
	record(a, false)
	record(b, true) // b's second failure in a row
	serving()

	now = now.Add(100 * time.Millisecond)
	record(c, true)
	record(c, true) // c is ejected too: two of three is past 50%
	serving()       // so b, the least recently ejected, serves again

	now = now.Add(time.Second)
	record(b, true) // b's back-off ended: its run starts from zero
	serving()
	// Output:
	// 0s: b ejected until 1s
	// 0s: serving a c
	// 100ms: c ejected until 1.1s
	// 100ms: serving a b
	// 1.1s: serving a b c
}
