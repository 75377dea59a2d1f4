package main

import (
	"fmt"
	"math"
	"time"
)

// phase is one stretch of a run: callers arrive at rate a second, and the
// server's workers take service for each request.
type phase struct {
	name     string
	duration time.Duration
	rate     float64
	service  time.Duration
}

// schedule is a run's phases, one after another.
type schedule []phase

// defaultSchedule is the run the README describes, for a server of k workers
// at service time svc (capacity k/svc a second): twice the capacity; the same
// load while the service time is ten times longer; then the service time back
// to normal and the load at three quarters of capacity, in which a client
// that recovered serves every caller promptly. scale stretches or shrinks
// every phase (1: 12 s, 10 s and 12 s).
func defaultSchedule(k int, svc time.Duration, scale float64) schedule {
	capacity := float64(k) / svc.Seconds()
	d := func(s float64) time.Duration { return time.Duration(s * scale * float64(time.Second)) }
	return schedule{
		{name: "overload", duration: d(12), rate: 2 * capacity, service: svc},
		{name: "slowdown", duration: d(10), rate: 2 * capacity, service: 10 * svc},
		{name: "recovery", duration: d(12), rate: 0.75 * capacity, service: svc},
	}
}

// total is how long the schedule runs.
func (s schedule) total() time.Duration {
	var t time.Duration
	for _, p := range s {
		t += p.duration
	}
	return t
}

// at is the index of the phase running at offset t from the start (the last
// phase for t past the end, the first before the start).
func (s schedule) at(t time.Duration) int {
	for i, p := range s {
		if t < p.duration {
			return i
		}
		t -= p.duration
	}
	return len(s) - 1
}

// start is the offset at which phase i begins.
func (s schedule) start(i int) time.Duration {
	var t time.Duration
	for _, p := range s[:i] {
		t += p.duration
	}
	return t
}

// arrivals lists the offsets at which callers arrive: evenly spaced within
// each phase at its rate (an open loop: arrivals do not wait for answers).
func (s schedule) arrivals() []time.Duration {
	var out []time.Duration
	var base time.Duration
	for _, p := range s {
		n := int(math.Round(p.rate * p.duration.Seconds()))
		for j := range n {
			out = append(out, base+time.Duration(j)*p.duration/time.Duration(n))
		}
		base += p.duration
	}
	return out
}

func (p phase) String() string {
	return fmt.Sprintf("%s: %.0f req/s, service %v, %v", p.name, p.rate, p.service, p.duration)
}
