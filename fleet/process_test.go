package fleet_test

// The multi-process test: three member processes (fleet/internal/member,
// built without the race detector, as protoactor's cluster has races of its
// own), each a cluster member with a connactor client whose fleet budget
// limits its connections to the upstream, etcd from Debian's etcd-server as
// their member provider, started by the test on 127.0.0.1, and one upstream
// in this process that counts connections from its side. The test kills the
// member that hosts the budget grain with SIGKILL and checks the budget at the
// upstream throughout. This driver runs under the race detector like every
// other test.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/testkit/fleettest"
	"github.com/connactor/connactor/internal/testkit/realtest"
)

// needEtcd returns the etcd binary (Debian's etcd-server). Without one the
// test skips loudly, or fails under CI=true (realtest.Tool).
func needEtcd(t *testing.T) string {
	t.Helper()
	return realtest.Tool(t, "etcd (apt-get install etcd-server)", fleettest.EtcdNames...)
}

// buildMember builds fleet/internal/member without the race detector.
func buildMember(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to build the member program: %v", err)
	}
	out := filepath.Join(dir, "member")
	cmd := exec.Command(goBin, "build", "-o", out, "github.com/connactor/connactor/fleet/internal/member")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the member program: %v\n%s", err, b)
	}
	return out
}

// watch follows the members' events.
type watch struct {
	t       *testing.T
	events  chan fleettest.ProcessEvent
	last    map[string]fleettest.Event // latest status by process
	ready   map[string]fleettest.Event
	hosts   []string // the process of each grain activation, in order
	budget  int
	history []string // a line per status, for the failure report
}

// until reads events until cond holds; the deadline guards against a hung
// test.
func (w *watch) until(what string, within time.Duration, cond func() bool) time.Duration {
	w.t.Helper()
	start := time.Now()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for !cond() {
		select {
		case e := <-w.events:
			w.record(e)
		case <-deadline.C:
			tail := w.history[max(0, len(w.history)-30):]
			w.t.Fatalf("not %s within %v; last statuses:\n%s", what, within, strings.Join(tail, "\n"))
		}
	}
	return time.Since(start)
}

func (w *watch) record(e fleettest.ProcessEvent) {
	switch e.Event.Event {
	case "ready":
		w.ready[e.Name] = e.Event
	case "activated":
		w.hosts = append(w.hosts, e.Name)
	case "status":
		w.last[e.Name] = e.Event
		w.history = append(w.history, fmt.Sprintf("%s %s members %d share %d held %d waiting %d floor %v safe %v served %d renewals %d failures %d",
			e.At.Format("15:04:05.000"), e.Name, e.Members, e.Share, e.Held, e.Waiting, e.OnFloor, e.Safe, e.Served, e.Renewals, e.Failures))
	}
}

func (w *watch) all(names []string, cond func(name string, e fleettest.Event) bool) func() bool {
	return func() bool {
		for _, n := range names {
			if e, ok := w.last[n]; !ok || !cond(n, e) {
				return false
			}
		}
		return true
	}
}

func TestProcessesHoldTheBudgetWhenTheGrainsHostIsKilled(t *testing.T) {
	etcdBin := needEtcd(t)
	dir := t.TempDir()
	logs, err := os.Create(filepath.Join(dir, "logs.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		logs.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("etcd and member logs:\n%s", b[max(0, len(b)-8000):])
		}
	}()
	memberBin := buildMember(t, dir)
	etcd, err := fleettest.StartEtcd(etcdBin, dir, logs)
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Stop()
	up, err := fleettest.NewUpstream(2 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()

	const budget = 12
	w := &watch{t: t, events: make(chan fleettest.ProcessEvent, 1024), last: map[string]fleettest.Event{}, ready: map[string]fleettest.Event{}, budget: budget}
	procs := map[string]*fleettest.Process{}
	var names []string
	defer func() {
		drained := make(chan struct{})
		go func() { // owned by this cleanup: keeps the forwarders from blocking until every process is gone
			for range w.events {
			}
			close(drained)
		}()
		for _, p := range procs {
			if err := p.Stop(30 * time.Second); err != nil {
				t.Errorf("%s: %v", p.Name, err)
			}
		}
		close(w.events) // every forwarder has ended: Stop and Kill wait for them
		<-drained
	}()
	cluster := fmt.Sprintf("fleet-test-%d", time.Now().UnixNano())
	// One after another: members started together can miss each other with
	// the etcd provider (PROTOACTOR.md).
	for i := range 3 {
		name := fmt.Sprintf("node%d", i+1)
		p, err := fleettest.StartProcess(name, memberBin, []string{
			"-etcd", etcd.Endpoint(), "-cluster", cluster, "-budget", fmt.Sprint(budget),
			"-upstream", up.Addr(), "-callers", "16", "-v",
		}, nil, w.events, logs)
		if err != nil {
			t.Fatal(err)
		}
		procs[name] = p
		names = append(names, name)
		w.until(name+" ready", 60*time.Second, func() bool { _, ok := w.ready[name]; return ok })
	}
	w.until("three members seen by each", 30*time.Second, w.all(names, func(_ string, e fleettest.Event) bool { return e.Members == 3 }))
	for _, p := range procs {
		if err := p.Send("load"); err != nil {
			t.Fatal(err)
		}
	}
	took := w.until("fair shares", 30*time.Second, w.all(names, func(_ string, e fleettest.Event) bool { return e.Share == 4 && e.Held == 4 }))
	t.Logf("fair shares (4 each of %d) %v after the load started", budget, took.Round(time.Millisecond))
	served := map[string]int{}
	for _, n := range names {
		served[n] = w.last[n].Served
	}
	w.until("more served", 60*time.Second, w.all(names, func(n string, e fleettest.Event) bool { return e.Served >= served[n]+200 }))

	if len(w.hosts) == 0 {
		t.Fatal("no grain activated")
	}
	host := w.hosts[len(w.hosts)-1]
	var survivors []string
	for _, n := range names {
		if n != host {
			survivors = append(survivors, n)
		}
	}
	procs[host].Kill()
	delete(procs, host)
	t.Logf("killed %s, the grain's host (activations so far: %v)", host, w.hosts)
	moved := w.until("the grain re-activated on a survivor", 30*time.Second, func() bool { return len(w.hosts) > 1 })
	t.Logf("the grain re-activated on %s %v after the kill (etcd drops a dead member after its 3 s lease)", w.hosts[len(w.hosts)-1], moved.Round(time.Millisecond))
	back := w.until("the dead member's share back", 30*time.Second, w.all(survivors, func(_ string, e fleettest.Event) bool {
		return e.Share == 6 && e.Held == 6 && !e.OnFloor && !e.Safe
	}))
	t.Logf("the survivors held leases of 6 each %v after the kill (then the new activation's safe mode: one lease)", (moved + back).Round(time.Millisecond))
	if w.hosts[len(w.hosts)-1] == host {
		t.Errorf("the grain re-activated on the dead member: activations %v", w.hosts)
	}
	for _, n := range survivors {
		served[n] = w.last[n].Served
	}
	w.until("more served by the survivors", 60*time.Second, w.all(survivors, func(n string, e fleettest.Event) bool { return e.Served >= served[n]+200 }))

	// Now a member that does not host the grain dies: its lease runs out at
	// the grain, which gives the last member everything.
	newHost := w.hosts[len(w.hosts)-1]
	victim := survivors[0]
	if victim == newHost {
		victim = survivors[1]
	}
	procs[victim].Kill()
	delete(procs, victim)
	last := []string{newHost}
	alone := w.until("the whole budget at the last member", 30*time.Second, w.all(last, func(_ string, e fleettest.Event) bool {
		return e.Share == budget && e.Held == budget && !e.OnFloor && !e.Safe
	}))
	t.Logf("killed %s (not the grain's host); %s held the whole budget on a lease %v later", victim, newHost, alone.Round(time.Millisecond))
	survivors = last

	const grace = 250 * time.Millisecond
	s := up.Stats()
	late := up.PeakAllowingLateCloses(grace)
	t.Logf("upstream: %d accepted, %d closed, %d served; peak %d open (%d with closes seen up to %v late), budget %d", s.Accepted, s.Closed, s.Served, s.Peak, late, grace, budget)
	if late > budget {
		t.Errorf("the upstream saw %d connections at once (allowing %v for late closes), budget %d", late, grace, budget)
	}
	if os.Getenv("FLEET_TEST_HISTORY") != "" {
		t.Logf("statuses:\n%s", strings.Join(w.history, "\n"))
	}
	for _, n := range survivors {
		e := w.last[n]
		t.Logf("%s: grain calls mean %v, p50 <= %v, p99 <= %v, max %v over %d answered, %d failed", n, e.CallMean.Round(time.Microsecond), e.CallP50, e.CallP99, e.CallMax.Round(time.Microsecond), e.Renewals, e.Failures)
	}
}
