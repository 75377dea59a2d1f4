package codel

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// event is what a route tells its Queue at ms at: a caller enqueued at enq
// ms left to be served (dequeue), or the oldest waiter was enqueued at enq
// ms (check; enq < 0: the queue is empty), whose answer must be shed.
type event struct {
	at, enq int
	dequeue bool
	shed    bool
}

func check(at, enq int, shed bool) event { return event{at: at, enq: enq, shed: shed} }
func dequeue(at, enq int) event          { return event{at: at, enq: enq, dequeue: true} }
func empty(at int) event                 { return event{at: at, enq: -1} }

// With a target of 20 ms and CoDel's 100 ms interval.
func TestQueueShedsOnlyAStandingQueue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []event
	}{{
		name: "a burst that drains within the interval is never shed, however long its waits",
		events: []event{
			check(0, 0, false), check(30, 0, false), check(60, 0, false),
			dequeue(90, 0), check(90, 5, false), dequeue(125, 5), empty(125),
			check(200, 150, false), check(260, 150, false),
		},
	}, {
		name: "waits above the target for a whole interval shed the oldest caller over the target",
		events: []event{
			check(0, 0, false), check(30, 0, false), check(129, 0, false), check(130, 0, true),
		},
	}, {
		name: "a wait exactly at the target is not above it",
		events: []event{
			check(0, 0, false), check(20, 0, false), check(119, 0, false), check(121, 0, false), check(221, 0, true),
		},
	}, {
		name: "shedding refuses callers oldest first until one has waited less than the target",
		events: []event{
			check(30, 0, false), check(130, 0, true), check(130, 10, true), check(130, 100, true),
			check(130, 115, false), check(131, 110, false),
		},
	}, {
		name: "after a wait below the target, shedding needs another whole interval above it",
		events: []event{
			check(30, 0, false), check(130, 0, true), check(130, 115, false),
			check(140, 115, false), check(239, 115, false), check(240, 115, true),
		},
	}, {
		name: "a caller served after a short wait resets the interval",
		events: []event{
			check(30, 0, false), dequeue(100, 95), check(100, 10, false),
			check(199, 10, false), check(200, 10, true),
		},
	}, {
		name: "a caller served after a long wait keeps it",
		events: []event{
			check(30, 0, false), dequeue(100, 0), check(130, 40, true),
		},
	}, {
		name: "an empty queue resets the interval",
		events: []event{
			check(30, 0, false), empty(100), check(130, 100, false), check(229, 100, false), check(230, 100, true),
		},
	}, {
		name: "a queue nobody leaves is judged by its oldest waiter alone",
		events: []event{
			check(10, 0, false), check(25, 0, false), check(124, 0, false), check(125, 0, true),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := New(20*time.Millisecond, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range tc.events {
				switch {
				case e.dequeue:
					q.OnDequeue(ms(e.at), ms(e.enq))
				case e.enq < 0:
					if q.ShouldShed(ms(e.at), time.Time{}) {
						t.Fatalf("event %d: ShouldShed(empty queue) = true", i)
					}
				default:
					if got := q.ShouldShed(ms(e.at), ms(e.enq)); got != e.shed {
						t.Fatalf("event %d (%+v): ShouldShed = %v, want %v", i, e, got, e.shed)
					}
				}
			}
		})
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
