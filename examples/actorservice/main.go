// Command actorservice is a small protoactor service that embeds connactor,
// the way a service built of actors uses it: a link checker. A coordinator
// actor fans URLs out to worker actors; each worker asks the connactor client
// with ctx.Request(c.PID(), &client.Request{HTTP: req, Tag: ...}) and handles
// the *client.Response that comes back as a message, reading and closing its
// body. The client lives in the service's own actor system (Config.System).
//
//	go run ./examples/actorservice
//
// checks the links of a small local site (two httptest servers on 127.0.0.1,
// with a missing page, a teapot and a dead port among the links) on one node,
// prints the report and the pool's statistics, and shuts down in the order a
// service should: its actors, then the client, then the actor system.
//
//	go run ./examples/actorservice -join 127.0.0.1:PORT/CLUSTER
//
// does the same as a member of a protoactor cluster (etcd provider, disthash)
// with a fleet budget on the client (Config.Fleet, a fleet.Budget):
// examples/fleet prints the flag's value while it runs. The shutdown order is
// then: actors, client, cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/fleet"
)

type options struct {
	join    string // "etcd host:port/cluster name"; "" = one node, no cluster
	budget  int    // the fleet budget per route when joined
	workers int
	depth   int
	logger  *slog.Logger
}

func main() {
	o := options{logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	flag.StringVar(&o.join, "join", "", "join a cluster: etcd endpoint and cluster name, as examples/fleet prints them (host:port/name)")
	flag.IntVar(&o.budget, "budget", 4, "with -join: the fleet budget, connections per route across the cluster")
	flag.IntVar(&o.workers, "workers", 4, "worker actors")
	flag.IntVar(&o.depth, "depth", 2, "how deep to follow links from the start page")
	flag.Parse()
	if err := run(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "actorservice:", err)
		os.Exit(1)
	}
}

// service is what the link checker runs on: an actor system (a cluster
// member's when joined) and a connactor client in it.
type service struct {
	sys     *actor.ActorSystem
	cluster *cluster.Cluster // nil on one node
	etcd    *clientv3.Client // the fleet budget's, when joined
	client  *client.Client
}

func startService(o options) (*service, error) {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(client.ProtoactorLogger(o.logger)))
	cfg := client.Config{System: sys, MaxConnsPerRoute: 4, Logger: o.logger}
	s := &service{sys: sys}
	if o.join != "" {
		c, cli, err := joinCluster(sys, o.join)
		if err != nil {
			return nil, err
		}
		s.cluster, s.etcd = c, cli
		budget, err := fleet.New(c, fleet.Options{MaxConnsPerRoute: o.budget, Etcd: cli})
		if err != nil {
			s.stop()
			return nil, err
		}
		cfg.System = nil // taken from the budget: the cluster's, which owns sys
		cfg.Fleet = budget
	}
	c, err := client.New(cfg)
	if err != nil {
		s.stop()
		return nil, err
	}
	s.client = c
	return s, nil
}

// stop ends the actor system: the cluster's Shutdown when joined (the member
// leaves, then its system stops).
func (s *service) stop() {
	if s.cluster != nil {
		s.cluster.Shutdown(true)
		s.etcd.Close()
		return
	}
	s.sys.Shutdown()
}

func run(out io.Writer, o options) error {
	site, err := startSite()
	if err != nil {
		return err
	}
	defer site.close()
	svc, err := startService(o)
	if err != nil {
		return err
	}
	if svc.cluster != nil {
		fmt.Fprintf(out, "joined cluster %q as %s; fleet budget %d connections per route\n", svc.cluster.Config.Name, svc.sys.Address(), o.budget)
	}

	done := make(chan []Result, 1)
	coord := svc.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &coordinator{start: []string{site.docs.URL + "/"}, maxDepth: o.depth, workers: o.workers,
			client: svc.client.PID(), done: done}
	}))
	var results []Result
	select {
	case results = <-done:
	case <-time.After(2 * time.Minute):
		err = errors.New("the link check did not end within 2 minutes")
	}
	st := svc.client.Stats()

	// Shut down in this order: the actors that use the client, the client
	// (Shutdown lets requests in flight finish; with a fleet budget it gives
	// the node's shares back), then the actor system or the cluster.
	svc.sys.Root.StopFuture(coord).Wait() // the workers are its children
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if serr := svc.client.Shutdown(ctx); serr != nil && err == nil {
		err = serr
	}
	svc.stop()
	if err != nil {
		return err
	}
	report(out, site, results, st)
	return nil
}

func report(out io.Writer, site *site, results []Result, st client.Stats) {
	slices.SortFunc(results, func(a, b Result) int { return strings.Compare(a.URL, b.URL) })
	broken := 0
	fmt.Fprintf(out, "%-6s  %-9s  %-44s  %s\n", "status", "took", "link", "found on")
	for _, r := range results {
		status := fmt.Sprint(r.Status)
		if r.Err != nil {
			status = "error"
		}
		if r.Broken() {
			broken++
		}
		from := site.name(r.From)
		if from == "" {
			from = "(start)"
		}
		fmt.Fprintf(out, "%-6s  %-9v  %-44s  %s\n", status, r.Took.Round(10*time.Microsecond), site.name(r.URL), from)
		if r.Err != nil {
			fmt.Fprintf(out, "        %v\n", r.Err)
		}
	}
	fmt.Fprintf(out, "\nchecked %d links, %d broken\n", len(results), broken)
	fmt.Fprintf(out, "\nthe pool (MaxConnsPerRoute 4):\n")
	for _, r := range st.Routes {
		fmt.Fprintf(out, "  %-28s  %d leases, %d on re-used connections, %d connections opened", site.name(r.Route), r.Leases, r.Reuses, r.Opened)
		if r.FleetState != "" {
			fmt.Fprintf(out, "; fleet share %d of %d (%s)", r.FleetShare, r.FleetBudget, r.FleetState)
		}
		fmt.Fprintln(out)
	}
	if st.FleetMembers > 0 {
		fmt.Fprintf(out, "the fleet: %d nodes share the budget\n", st.FleetMembers)
	}
}
