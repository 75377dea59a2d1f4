package hedge_test

import (
	"fmt"
	"time"

	"github.com/connactor/connactor/actors/hedge"
)

// How a route uses the pieces: every response head's latency goes to its
// sketch and every request to its budget; a request whose attempt has been
// written asks Decide when its next attempt is due, and again when it is.
func Example() {
	p := hedge.Policy{}.WithDefaults() // p95 of the route's latency, 2 attempts
	var sketch hedge.Sketch
	var budget hedge.Budget
	now := time.Unix(1_800_000_000, 0)

	// The route has seen 100 requests: 95 answered in 1 ms, 5 in 50 ms.
	for i := range 100 {
		budget.Request(now)
		d := time.Millisecond
		if i%20 == 0 {
			d = 50 * time.Millisecond
		}
		sketch.Add(now, d)
	}

	// A new request's first attempt is written at now; the p95 is 1 ms
	// (within the sketch's 1/16).
	budget.Request(now)
	attempts := hedge.Attempts{Written: 1, LastWritten: now}
	room := func() bool { return true } // the route has an idle connection
	delay, ok := p.DelayAt(&sketch, now)
	v, at := hedge.Decide(p, delay, ok, attempts, now, room, &budget)
	fmt.Printf("at 0: %v until %v\n", v, at.Sub(now).Round(10*time.Microsecond))

	// No response head by then: the hedge goes.
	v, _ = hedge.Decide(p, delay, ok, attempts, at, room, &budget)
	fmt.Println("then:", v)

	// With both attempts written, nothing more.
	attempts = hedge.Attempts{Written: 2, LastWritten: at}
	v, _ = hedge.Decide(p, delay, ok, attempts, at.Add(time.Second), room, &budget)
	fmt.Println("after the second:", v)
	// Output:
	// at 0: wait until 1.02ms
	// then: send
	// after the second: done
}
