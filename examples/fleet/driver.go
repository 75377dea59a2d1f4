package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/connactor/connactor/fleet"
	"github.com/connactor/connactor/internal/testkit/fleettest"
)

// lateClose is how late the upstream may see a close: a node that closes a
// connection and another that opens one right after can have the upstream see
// the open first.
const lateClose = 250 * time.Millisecond

// driver drives the member processes and prints what they report.
type driver struct {
	out    io.Writer
	o      options
	up     *fleettest.Upstream
	logs   io.Writer
	events chan fleettest.ProcessEvent
	procs  map[string]*fleettest.Process
	names  []string
	last   map[string]fleettest.Event
	ready  map[string]bool
	hosts  []string // where the route's ledger came to be owned, in order
	dead   string
	served int // by the upstream, at the last row
}

func newDriver(out io.Writer, o options, up *fleettest.Upstream, logs io.Writer) *driver {
	return &driver{
		out: out, o: o, up: up, logs: logs, events: make(chan fleettest.ProcessEvent, 1024),
		procs: map[string]*fleettest.Process{}, last: map[string]fleettest.Event{}, ready: map[string]bool{},
	}
}

// start starts a member and waits until it is ready: members start one after
// another, as a member that joins while another starts can go unseen with the
// etcd provider.
func (f *driver) start(name, self string, args []string) error {
	p, err := startSelf(name, self, args, f.events, f.logs)
	if err != nil {
		return err
	}
	f.procs[name] = p
	f.names = append(f.names, name)
	return f.until(name+" ready", 60*time.Second, func() bool { return f.ready[name] })
}

func startSelf(name, self string, args []string, events chan<- fleettest.ProcessEvent, logs io.Writer) (*fleettest.Process, error) {
	return fleettest.StartProcess(name, self, args, []string{memberEnv + "=1"}, events, logs)
}

func (f *driver) record(e fleettest.ProcessEvent) {
	switch e.Event.Event {
	case "ready":
		f.ready[e.Name] = true
	case "owned":
		f.hosts = append(f.hosts, e.Name)
	case "status":
		f.last[e.Name] = e.Event
	}
}

// until reads events until cond holds or within has passed.
func (f *driver) until(what string, within time.Duration, cond func() bool) error {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for !cond() {
		select {
		case e := <-f.events:
			f.record(e)
		case <-deadline.C:
			return fmt.Errorf("not %s within %v", what, within)
		}
	}
	return nil
}

// for reads events for d.
func (f *driver) wait(d time.Duration) {
	_ = f.until("", d, func() bool { return false })
}

func (f *driver) alive() []string {
	return slices.DeleteFunc(slices.Clone(f.names), func(n string) bool { return n == f.dead })
}

// play runs the load, kills the owner of the route's ledger halfway and prints the table and
// the figures.
func (f *driver) play() error {
	if err := f.until("three members seen by each", 30*time.Second, func() bool {
		for _, n := range f.names {
			if f.last[n].Members != 3 {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	for _, p := range f.procs {
		if err := p.Send("load"); err != nil {
			return err
		}
	}
	start := time.Now()
	f.header()
	var (
		killedAt             time.Time
		wholeBack, leaseBack time.Duration // until the survivors held the whole budget, and on leases out of safe mode
	)
	for row := 1; time.Since(start) < f.o.duration; row++ {
		f.wait(time.Until(start.Add(time.Duration(row) * f.o.every)))
		var notes []string
		if killedAt.IsZero() && time.Since(start) >= f.o.duration/2 && len(f.hosts) > 0 {
			f.dead = f.hosts[len(f.hosts)-1]
			f.procs[f.dead].Kill()
			killedAt = time.Now()
			notes = append(notes, "killed "+f.dead+" (SIGKILL), the owner of the route's ledger")
		}
		if !killedAt.IsZero() {
			held, leased := 0, true
			for _, n := range f.alive() {
				held += f.last[n].Held
				leased = leased && !f.last[n].OnFloor && !f.last[n].Safe
			}
			if held == f.o.budget && wholeBack == 0 {
				wholeBack = time.Since(killedAt)
				notes = append(notes, "the survivors hold the whole budget")
			}
			if held == f.o.budget && leased && leaseBack == 0 {
				leaseBack = time.Since(killedAt)
				notes = append(notes, "on leases")
			}
		}
		f.row(time.Since(start), strings.Join(notes, ", "))
	}
	return f.summary(wholeBack, leaseBack)
}

func (f *driver) header() {
	fmt.Fprintf(f.out, "%6s", "t")
	for _, n := range f.names {
		fmt.Fprintf(f.out, "  %-16s", n+" share/held")
	}
	fmt.Fprintf(f.out, "  %-15s  %s\n", "upstream open", "served/s")
}

func (f *driver) row(t time.Duration, note string) {
	fmt.Fprintf(f.out, "%5.1fs", t.Seconds())
	if note != "" {
		note = "<- " + note
	}
	for _, n := range f.names {
		e := f.last[n]
		cell := "dead"
		if n != f.dead {
			cell = fmt.Sprintf("%2d/%-2d", e.Share, e.Held)
			switch {
			case e.OnFloor:
				cell += " floor"
			case e.Safe:
				cell += " safe"
			}
		}
		fmt.Fprintf(f.out, "  %-16s", cell)
	}
	s := f.up.Stats()
	rate := float64(s.Served-f.served) / f.o.every.Seconds()
	f.served = s.Served
	fmt.Fprintf(f.out, "  %2d of %-2d budget  %8.0f  %s\n", s.Open, f.o.budget, rate, note)
}

func (f *driver) summary(wholeBack, leaseBack time.Duration) error {
	fmt.Fprintf(f.out, "\nshare/held: the node's share of the budget and the connections it holds (dials included);\n"+
		"floor: the lease expired while the owner of the route's ledger cannot reach etcd: the node uses\n"+
		"  the floor the owner vouches for (at most budget / nodes registered), which it keeps counting;\n"+
		"safe: the ledger was taken over from a member that died (once etcd dropped its session): for\n"+
		"  one lease (%v) it grants no node more than it has\n", fleet.DefaultLease)
	s := f.up.Stats()
	late := f.up.PeakAllowingLateCloses(lateClose)
	fmt.Fprintf(f.out, "\nthe upstream: %d connections accepted, %d closed, %d requests served\n", s.Accepted, s.Closed, s.Served)
	fmt.Fprintf(f.out, "peak: %d connections open at once (%d counting closes up to %v late) against a budget of %d\n", s.Peak, late, lateClose, f.o.budget)
	if f.dead != "" {
		fmt.Fprintf(f.out, "the survivors held the whole budget %s after the kill (%s on leases out of safe mode)\n", since(wholeBack), since(leaseBack))
	}
	for _, n := range f.alive() {
		e := f.last[n]
		fmt.Fprintf(f.out, "%s: renewals mean %v, p50 <= %v, p99 <= %v, max %v (%d answered, %d failed or timed out)\n",
			n, e.CallMean.Round(time.Microsecond), e.CallP50, e.CallP99, e.CallMax.Round(time.Microsecond), e.Renewals, e.Failures)
	}
	if late > f.o.budget {
		return fmt.Errorf("the budget did not hold: %d connections at once, budget %d", late, f.o.budget)
	}
	fmt.Fprintln(f.out, "budget held")
	return nil
}

func since(d time.Duration) string {
	if d == 0 {
		return "not yet"
	}
	return "after " + d.Round(100*time.Millisecond).String()
}

// stop stops the living members (they give their shares back and leave).
func (f *driver) stop() {
	drained := make(chan struct{})
	go func() { // owned by stop: keeps the forwarders from blocking until every process is gone
		for range f.events {
		}
		close(drained)
	}()
	for _, n := range f.alive() {
		if err := f.procs[n].Stop(30 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "fleet:", err)
		}
	}
	close(f.events)
	<-drained
}

func etcdVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return ""
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimPrefix(first, "etcd Version: ")
}
