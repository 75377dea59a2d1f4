package codel

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// event is what a route tells its Queue at ms at: its oldest waiter was
// enqueued at enq ms (enq < 0: the queue is empty), and whether the answer
// must be shed.
type event struct {
	at, enq int
	shed    bool
}

func check(at, enq int, shed bool) event { return event{at: at, enq: enq, shed: shed} }
func empty(at int) event                 { return event{at: at, enq: -1} }

func run(t *testing.T, events []event) {
	t.Helper()
	q, err := New(20*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range events {
		if e.enq < 0 {
			if q.ShouldShed(ms(e.at), time.Time{}) {
				t.Fatalf("event %d: ShouldShed(empty queue) = true", i)
			}
			continue
		}
		if got := q.ShouldShed(ms(e.at), ms(e.enq)); got != e.shed {
			t.Fatalf("event %d (%+v): ShouldShed = %v, want %v", i, e, got, e.shed)
		}
	}
}

// With a target of 20 ms and CoDel's 100 ms interval.
func TestQueueShedsOnlyAStandingQueue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []event
	}{{
		name: "a burst that drains within the interval is never shed, however long its waits",
		events: []event{
			check(0, 0, false), check(30, 0, false), check(60, 0, false),
			check(90, 5, false), check(99, 50, false), empty(99),
			check(200, 150, false), check(249, 150, false),
		},
	}, {
		name: "a queue not empty for a whole interval sheds its oldest caller over the target",
		events: []event{
			check(0, 0, false), check(30, 0, false), check(99, 0, false), check(100, 0, true),
		},
	}, {
		name: "the interval counts from the caller who found the queue empty, not from the first wait over the target",
		events: []event{
			empty(0), check(50, 40, false), check(139, 40, false), check(140, 40, true),
		},
	}, {
		name: "a wait exactly at the target is not above it",
		events: []event{
			check(0, 0, false), check(150, 130, false), check(150, 129, true),
		},
	}, {
		name: "shedding refuses callers oldest first until one has waited no longer than the target",
		events: []event{
			check(30, 0, false), check(130, 0, true), check(130, 10, true), check(130, 100, true),
			check(130, 115, false), check(131, 112, false),
		},
	}, {
		name: "a queue that stands with short waits loses no one",
		events: []event{
			check(0, 0, false), check(150, 140, false), check(300, 285, false), check(500, 481, false),
		},
	}, {
		name: "an empty queue restarts the interval",
		events: []event{
			check(30, 0, false), empty(100), check(130, 100, false), check(199, 100, false), check(200, 100, true),
		},
	}, {
		name: "a queue nobody leaves is judged by its oldest waiter alone",
		events: []event{
			check(10, 0, false), check(25, 0, false), check(99, 0, false), check(100, 0, true),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) { run(t, tc.events) })
	}
}

// A standing queue is held at the target: the short waits left by a wave of
// refusals do not end it, so the next caller over the target is refused as
// soon as it is, not after the queue has built for target + interval again.
func TestQueueKeepsRefusingAfterItsOwnWaveOfRefusals(t *testing.T) {
	run(t, []event{
		check(0, 0, false), check(30, 0, false), check(130, 0, true), check(130, 60, true), check(130, 115, false),
		// the wave left a caller that waited 15 ms; 6 ms later it has waited 21.
		check(136, 115, true), check(136, 120, false),
		check(155, 134, true), check(155, 136, false),
		check(230, 209, true), check(230, 211, false),
	})
}

func TestDueAtIsWhenTheOldestCallerWouldBeRefused(t *testing.T) {
	q, _ := New(20*time.Millisecond, 0)
	if !q.DueAt(time.Time{}).IsZero() {
		t.Fatal("DueAt(empty queue) is not the zero time")
	}
	if got, want := q.DueAt(ms(0)), ms(100); !got.Equal(want) {
		t.Fatalf("DueAt of a queue that just filled = %v, want the interval's end %v", got, want)
	}
	q.ShouldShed(ms(10), ms(0))
	if got, want := q.DueAt(ms(150)), ms(170).Add(1); !got.Equal(want) {
		t.Fatalf("DueAt in a standing queue = %v, want the target's end %v", got, want)
	}
	if q.ShouldShed(ms(170), ms(150)) || !q.ShouldShed(ms(170).Add(1), ms(150)) {
		t.Fatal("ShouldShed disagrees with DueAt")
	}
}

func TestNewRefusesANonPositiveTargetOrInterval(t *testing.T) {
	for _, c := range [][2]time.Duration{{0, 0}, {-time.Millisecond, 0}, {time.Millisecond, -time.Millisecond}} {
		if _, err := New(c[0], c[1]); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%v, %v) = %v, want ErrInvalidConfig", c[0], c[1], err)
		}
	}
}

func BenchmarkShouldShed(b *testing.B) {
	q, _ := New(20*time.Millisecond, 0)
	b.ReportAllocs()
	now := t0
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Millisecond)
		q.ShouldShed(now, now.Add(-time.Duration(i%50)*time.Millisecond))
	}
}
