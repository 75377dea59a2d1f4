// Command member is one member of a fleet for fleet's multi-process test: see
// fleettest.RunMember for what it does, reads and writes. The test builds it
// without the race detector (protoactor's cluster has races of its own,
// fleet/RACES.md).
package main

import (
	"flag"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/connactor/connactor/internal/testkit/fleettest"
)

func main() {
	var cfg fleettest.MemberConfig
	etcd := flag.String("etcd", "", "etcd client endpoints, host:port, comma-separated")
	flag.StringVar(&cfg.Cluster, "cluster", "connactor-fleet", "cluster name")
	flag.IntVar(&cfg.Budget, "budget", 12, "fleet budget per route")
	flag.IntVar(&cfg.Floor, "floor", 0, "fleet.Options.Floor")
	flag.StringVar(&cfg.Upstream, "upstream", "", "upstream host:port")
	flag.IntVar(&cfg.Callers, "callers", 10, "callers once loaded")
	flag.DurationVar(&cfg.Report, "report", 100*time.Millisecond, "status interval")
	verbose := flag.Bool("v", false, "log protoactor and the keeper (warnings and up) to stderr")
	flag.Parse()
	cfg.Etcd = strings.Split(*etcd, ",")
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if err := fleettest.RunMember(cfg, os.Stdin, os.Stdout); err != nil {
		slog.Error("member", "error", err)
		os.Exit(1)
	}
}
