package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/connactor/connactor/internal/testkit/fleettest"
	"github.com/connactor/connactor/internal/testkit/realtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// protoactor's dead-letter throttle: a one-shot timer goroutine that
		// ends by itself after DeadLetterThrottleInterval.
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// The report every run must give: each link's outcome, found where.
var wantReport = []string{
	`(?m)^200 .* docs/ +\(start\)$`,
	`(?m)^200 .* docs/guide +docs/$`,
	`(?m)^200 .* docs/faq +docs/guide$`,
	`(?m)^301 .* docs/old-faq +docs/guide$`,
	`(?m)^404 .* docs/missing +docs/$`,
	`(?m)^200 .* api/v1/things +docs/reference$`,
	`(?m)^404 .* api/v1/gone +docs/reference$`,
	`(?m)^418 .* api/teapot +docs/$`,
	`(?m)^error .* dead/ +docs/$`,
	`connection refused`,
	`checked 11 links, 4 broken`,
}

func checkReport(t *testing.T, out string) {
	t.Helper()
	for _, want := range wantReport {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// One node: the link checker's actors and the client share one actor system,
// and everything is shut down, in order, when run returns.
func TestLinkCheckerOnOneNode(t *testing.T) {
	var out bytes.Buffer
	err := run(&out, options{workers: 3, depth: 2, logger: slog.New(slog.DiscardHandler)})
	t.Logf("\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, out.String())
	if !strings.Contains(out.String(), "connections opened") || strings.Contains(out.String(), "fleet") {
		t.Error("the pool's statistics are missing, or show a fleet budget on one node")
	}
}

// With -join, the service is a member of a cluster on etcd, next to another
// member process of examples/fleet's kind (fleet/internal/member), and its
// client has a fleet budget. Both programs are built without the race
// detector (protoactor's cluster has races of its own, fleet/RACES.md).
func TestLinkCheckerJoinsAFleet(t *testing.T) {
	etcdBin := realtest.Tool(t, "etcd (apt-get install etcd-server)", fleettest.EtcdNames...)
	dir := t.TempDir()
	service := build(t, dir, "actorservice", ".")
	member := build(t, dir, "member", "github.com/connactor/connactor/fleet/internal/member")
	var logs bytes.Buffer
	etcd, err := fleettest.StartEtcd(etcdBin, dir, &logs)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	defer etcd.Stop()
	up, err := fleettest.NewUpstream(0)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()

	name := fmt.Sprintf("actorservice-test-%d", time.Now().UnixNano())
	events := make(chan fleettest.ProcessEvent, 256)
	p, err := fleettest.StartProcess("member", member, []string{"-etcd", etcd.Endpoint(), "-cluster", name,
		"-upstream", up.Addr(), "-callers", "0"}, nil, events, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// One reader of the member's events for the whole test (a member whose
	// output is not read blocks); it tells when the member is ready.
	ready, drained := make(chan struct{}), make(chan struct{})
	go func() { // owned by the deferred stop below, which waits for drained
		defer close(drained)
		for e := range events {
			if e.Event.Event == "ready" {
				close(ready)
			}
		}
	}()
	defer func() {
		if err := p.Stop(30 * time.Second); err != nil {
			t.Errorf("member: %v", err)
		}
		close(events) // the forwarder has ended: Stop waits for it
		<-drained
	}()
	// The service joins once the member is up: members that start at the
	// same moment can miss each other with the etcd provider.
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("the member process did not start within 60 s")
	}

	cmd := exec.Command(service, "-join", etcd.Endpoint()+"/"+name, "-budget", "3")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	out := string(outb)
	t.Logf("\n%s", out)
	if err != nil {
		t.Fatalf("the service failed: %v\n%s", err, stderr.String())
	}
	checkReport(t, out)
	for _, want := range []string{
		`joined cluster "` + name + `"`,
		`(?m)^  docs .*fleet share \d of 3 \(\w+\)$`,
		`the fleet: 2 nodes share the budget`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func build(t *testing.T, dir, name, pkg string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command: %v", err)
	}
	bin := filepath.Join(dir, name)
	if b, err := exec.Command(goBin, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return bin
}
