// Command fleet shows fleet-wide connection budgets: three nodes of a
// protoactor cluster, each with its own connactor client, share one budget
// per upstream (client.Config.Fleet, a fleet.Budget), so that together they
// never open more than it.
//
//	go run ./examples/fleet
//
// It starts etcd (Debian's etcd-server, /usr/bin/etcd) on 127.0.0.1 as the
// cluster's member provider, a local upstream that counts connections from its
// side, and three member processes (this program again): each runs a cluster
// member with fleet.Kind() among its kinds and a connactor client on
// that cluster (its fleet budget on the same etcd), whose callers keep asking
// the upstream. Halfway it kills the member that owns the route's ledger with
// SIGKILL. It prints, every second,
// each node's share and connections, the connections the upstream sees
// against the budget, and the requests served; then the figures: the peak
// against the budget, how long the dead node's share took to come back, and
// how long renewals took (from each client's
// connactor.fleet.renewal.duration histogram).
//
// While it runs, another service can join its cluster: it prints the command
// for examples/actorservice.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/connactor/connactor/internal/testkit/fleettest"
)

// memberEnv marks a process started by this program as a member.
const memberEnv = "CONNACTOR_FLEET_EXAMPLE_MEMBER"

type options struct {
	duration time.Duration // of the load; the kill comes halfway
	budget   int
	callers  int
	every    time.Duration // between two table rows
}

func main() {
	if os.Getenv(memberEnv) != "" {
		member()
		return
	}
	var o options
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "how long the load runs; a node is killed halfway")
	flag.IntVar(&o.budget, "budget", 12, "the fleet budget: connections to the upstream across all nodes")
	flag.IntVar(&o.callers, "callers", 10, "callers per node (more than budget/3, so that every node wants more)")
	flag.DurationVar(&o.every, "every", time.Second, "time between two rows of the table")
	flag.Parse()
	if err := run(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// member runs this process as one member (fleettest.RunMember).
func member() {
	var cfg fleettest.MemberConfig
	etcd := flag.String("etcd", "", "etcd endpoint")
	flag.StringVar(&cfg.Cluster, "cluster", "", "cluster name")
	flag.IntVar(&cfg.Budget, "budget", 12, "budget")
	flag.StringVar(&cfg.Upstream, "upstream", "", "upstream host:port")
	flag.IntVar(&cfg.Callers, "callers", 10, "callers")
	flag.Parse()
	cfg.Etcd = []string{*etcd}
	cfg.Report = 100 * time.Millisecond
	if err := fleettest.RunMember(cfg, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "member:", err)
		os.Exit(1)
	}
}

func run(out io.Writer, o options) error {
	etcdBin := fleettest.EtcdPath()
	if etcdBin == "" {
		return fmt.Errorf("no etcd binary: install Debian's etcd-server (apt-get install etcd-server), which provides /usr/bin/etcd")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "connactor-fleet-example-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logs, err := os.Create(dir + "/logs.txt")
	if err != nil {
		return err
	}
	defer logs.Close()

	etcd, err := fleettest.StartEtcd(etcdBin, dir, logs)
	if err != nil {
		return err
	}
	defer etcd.Stop()
	up, err := fleettest.NewUpstream(2 * time.Millisecond)
	if err != nil {
		return err
	}
	defer up.Close()

	f := newDriver(out, o, up, logs)
	defer f.stop()
	fmt.Fprintf(out, "connactor fleet example: 3 member processes, etcd %s on 127.0.0.1, upstream %s\n", etcdVersion(etcdBin), up.URL())
	fmt.Fprintf(out, "budget %d connections to the upstream across the fleet; %d callers per node\n", o.budget, o.callers)
	cluster := fmt.Sprintf("connactor-fleet-example-%d", time.Now().UnixNano())
	fmt.Fprintf(out, "another service can join the cluster meanwhile: go run ./examples/actorservice -join %s/%s\n\n", etcd.Endpoint(), cluster)
	for i := range 3 {
		args := []string{"-etcd", etcd.Endpoint(), "-cluster", cluster, "-budget", fmt.Sprint(o.budget),
			"-upstream", up.Addr(), "-callers", fmt.Sprint(o.callers)}
		if err := f.start(fmt.Sprintf("node%d", i+1), self, args); err != nil {
			return err
		}
	}
	return f.play()
}
