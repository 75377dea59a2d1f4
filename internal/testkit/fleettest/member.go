package fleettest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/fleet"
	"github.com/connactor/connactor/fleet/etcdprovider"
)

// MemberConfig configures RunMember.
type MemberConfig struct {
	Cluster  string        // the cluster's name
	Etcd     []string      // etcd client endpoints, host:port
	Budget   int           // the fleet budget per route
	Floor    int           // fleet.Options.Floor
	Upstream string        // the upstream's host:port
	Callers  int           // the client's callers once loaded
	Report   time.Duration // between two status events (default 250 ms)
	Logger   *slog.Logger  // protoactor's and the client's logs (nil: discarded)
}

// Event is one line a member writes, as JSON.
type Event struct {
	Event   string    `json:"event"` // ready, owned, status, stopped
	At      time.Time `json:"at"`
	Member  string    `json:"member,omitempty"`  // the actor system's ID (ready)
	Address string    `json:"address,omitempty"` // the member's address (ready)
	Route   string    `json:"route,omitempty"`   // the route whose ledger this member came to own (owned)

	// status
	Members  int  `json:"members,omitempty"`
	Share    int  `json:"share"`
	Budget   int  `json:"budget,omitempty"`
	OnFloor  bool `json:"on_floor,omitempty"`
	Safe     bool `json:"safe,omitempty"`
	Held     int  `json:"held"`
	Idle     int  `json:"idle"`
	Waiting  int  `json:"waiting"`
	Served   int  `json:"served"`
	Failed   int  `json:"failed"`
	Renewals int  `json:"renewals"`
	Failures int  `json:"failures"`
	// Renewals answered so far, from the client's
	// connactor.fleet.renewal.duration (p50 and p99: bucket upper bounds).
	CallMean time.Duration `json:"call_mean_ns,omitempty"`
	CallP50  time.Duration `json:"call_p50_ns,omitempty"`
	CallP99  time.Duration `json:"call_p99_ns,omitempty"`
	CallMax  time.Duration `json:"call_max_ns,omitempty"`
}

// RunMember runs one member of a fleet: a protoactor cluster member (etcd
// provider, disthash) with the budget host's kind, and a connactor client
// with a fleet budget (client.Config.Fleet, on the same etcd) whose callers,
// once loaded, keep asking the upstream. It writes Events to out, one JSON
// object a line: "ready" once the member has started, "owned" when it comes
// to own the ledger of the upstream's route, "status" every Report,
// "stopped" at the end. It reads
// commands from in, one a line: "load" starts the callers, "stop" (or the end
// of in) stops the member the way a service shuts down: the callers end, the
// client shuts down (its connections close and its shares go back), the
// member leaves the cluster. A member killed with SIGKILL does none of that.
func RunMember(cfg MemberConfig, in io.Reader, out io.Writer) error {
	if cfg.Report <= 0 {
		cfg.Report = 250 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var outMu sync.Mutex
	enc := json.NewEncoder(out)
	emit := func(e Event) {
		e.At = time.Now()
		outMu.Lock()
		defer outMu.Unlock()
		_ = enc.Encode(e)
	}

	route := "http://" + cfg.Upstream
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return cfg.Logger }))
	// fleet.Kind() with a hook that says where the route's ledger lives.
	kind := fleet.NewKind(fleet.KindConfig{OnOwned: func(shard int, _ uint64) {
		if shard == fleet.Shard(route) {
			emit(Event{Event: "owned", Route: route})
		}
	}})
	cl := cluster.New(sys, cluster.Configure(cfg.Cluster, etcdprovider.New(EtcdRoot, cfg.Etcd), disthash.New(),
		remote.Configure("127.0.0.1", 0), cluster.WithKinds(kind)))
	cl.StartMember()
	// The fleet's own etcd client, made after StartMember (an earlier one
	// races with remote.Start's gRPC logger).
	etcdCli, err := clientv3.New(etcdprovider.ClientConfig(cfg.Etcd))
	if err != nil {
		cl.Shutdown(true)
		return err
	}
	defer etcdCli.Close()

	renewals := NewRenewals()
	defer renewals.MeterProvider.Shutdown(context.Background())
	budget, err := fleet.New(cl, fleet.Options{MaxConnsPerRoute: cfg.Budget, Floor: cfg.Floor, Etcd: etcdCli})
	if err != nil {
		cl.Shutdown(true)
		return err
	}
	c, err := client.New(client.Config{
		Fleet:            budget,
		MaxConnsPerRoute: cfg.Budget, // the fleet budget is the limit that matters here
		MaxConnsTotal:    max(cfg.Budget, client.DefaultMaxConnsTotal),
		MeterProvider:    renewals.MeterProvider,
		Logger:           cfg.Logger,
	})
	if err != nil {
		cl.Shutdown(true)
		return err
	}
	emit(Event{Event: "ready", Member: sys.ID, Address: sys.Address()})

	var load *Load
	var loadMu sync.Mutex
	statusDone := make(chan struct{})
	var statusLoop sync.WaitGroup
	statusLoop.Go(func() {
		t := time.NewTicker(cfg.Report)
		defer t.Stop()
		for {
			select {
			case <-statusDone:
				return
			case <-t.C:
				loadMu.Lock()
				l := load
				loadMu.Unlock()
				emit(status(c, route, l, renewals))
			}
		}
	})

	scan := bufio.NewScanner(in)
	for scan.Scan() {
		cmd := strings.TrimSpace(scan.Text())
		if cmd == "stop" {
			break
		}
		loadMu.Lock()
		if cmd == "load" && load == nil {
			load = StartLoad(c, route+"/", cfg.Callers)
		}
		loadMu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loadMu.Lock()
	if load != nil {
		load.Stop()
	}
	loadMu.Unlock()
	close(statusDone)
	statusLoop.Wait()
	err = c.Shutdown(ctx)
	cl.Shutdown(true)
	emit(Event{Event: "stopped"})
	return err
}

// status reads the member's state: the route's share and connections from the
// client's Stats, its renewals from the client's metrics.
func status(c *client.Client, route string, l *Load, renewals *Renewals) Event {
	st := c.Stats()
	r := RouteOf(st, route)
	e := Event{Event: "status", Members: st.FleetMembers, Share: r.FleetShare, Budget: r.FleetBudget,
		OnFloor: r.FleetState == client.FleetFloor, Safe: r.FleetState == client.FleetSafe,
		Held: r.Open, Idle: r.Idle, Waiting: r.Pending}
	if l != nil {
		e.Served, e.Failed = l.Served(), l.Failed()
	}
	rs := renewals.Read()
	e.Renewals, e.Failures = rs.Answered, rs.Failed
	e.CallMean, e.CallP50, e.CallP99, e.CallMax = rs.Mean, rs.P50, rs.P99, rs.Max
	return e
}
