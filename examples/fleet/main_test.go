package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/connactor/connactor/internal/testkit/fleettest"
	"github.com/connactor/connactor/internal/testkit/realtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The example runs as it does from the command line, built without the race
// detector: its member processes are this program too, and protoactor's
// cluster has races of its own (fleet/RACES.md).
func TestExampleHoldsTheBudgetWhenANodeIsKilled(t *testing.T) {
	realtest.Tool(t, "etcd (apt-get install etcd-server)", fleettest.EtcdNames...)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "fleet")
	if b, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	out, err := exec.Command(bin, "-duration", "24s", "-every", "500ms").CombinedOutput()
	t.Logf("\n%s", out)
	if err != nil {
		t.Fatalf("the example failed: %v", err)
	}
	for _, want := range []string{
		`killed node\d \(SIGKILL\), the owner of the route's ledger`,
		`the survivors hold the whole budget`,
		`peak: \d+ connections open at once \(\d+ counting closes up to 250ms late\) against a budget of 12`,
		`(?m)^budget held$`,
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(string(out), "not yet") {
		t.Errorf("the dead node's share did not come back within the run")
	}
}
