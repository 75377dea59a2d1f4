package client

import (
	"go/build"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The packages are layered one way: client speaks to the pool (actors) only,
// never to the connections (conn, conn/h2) it leases; the connections know
// nothing of the pool or the client; route and telemetry call nothing above
// them; the status page knows the pool's stats values, not the client. The
// imports of each package's non-test files show it.
func TestPackagesImportOnlyTheLayersBelowThem(t *testing.T) {
	const mod = "github.com/connactor/connactor/"
	for _, rule := range []struct {
		dir     string
		allowed []string // the module's packages it may import
	}{
		{"../client", []string{"actors", "route", "telemetry", "internal/dispatch", "internal/status"}},
		{"../internal/status", []string{"actors", "route"}},
		{"../conn", []string{"conn/h2", "route", "internal/errs", "internal/mailbox", "internal/wait"}},
		{"../conn/h2", []string{"route", "internal/errs"}},
		{"../route", []string{"internal/jsonsec"}},
		{"../telemetry", []string{"route", "internal/jsonsec"}},
	} {
		pkg, err := build.ImportDir(rule.dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", rule.dir, err)
		}
		for _, imp := range pkg.Imports {
			own, ok := strings.CutPrefix(imp, mod)
			if ok && !slices.Contains(rule.allowed, own) {
				t.Errorf("%s imports %s; it may import only %v of this module", strings.TrimPrefix(rule.dir, "../"), imp, rule.allowed)
			}
		}
	}
}

// A program that does not use a fleet budget links no part of protoactor's
// cluster and no gRPC: the fleet is in package fleet, which implements
// actors.FleetBudget, and nothing the client imports imports it.
func TestClientLinksNoClusterNorGRPC(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to list the client's dependencies: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "github.com/connactor/connactor/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/asynkron/protoactor-go/cluster") || strings.HasPrefix(dep, "google.golang.org/grpc") ||
			strings.HasPrefix(dep, "github.com/connactor/connactor/fleet") {
			t.Errorf("the client depends on %s", dep)
		}
	}
}
