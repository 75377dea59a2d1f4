package fleettest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/connactor/connactor/fleet"
)

// MemberConfig configures RunMember.
type MemberConfig struct {
	Cluster  string        // the cluster's name
	Etcd     []string      // etcd client endpoints, host:port
	Budget   int           // the fleet budget per route
	Floor    int           // fleet.Config.Floor
	Upstream string        // the upstream's host:port
	Callers  int           // the pool's callers once loaded
	Report   time.Duration // between two status events (default 250 ms)
	Logger   *slog.Logger  // protoactor's and the keeper's logs (nil: discarded)
}

// Event is one line a member writes, as JSON.
type Event struct {
	Event   string    `json:"event"` // ready, activated, status, stopped
	At      time.Time `json:"at"`
	Member  string    `json:"member,omitempty"`  // the actor system's ID (ready)
	Address string    `json:"address,omitempty"` // the member's address (ready)
	Route   string    `json:"route,omitempty"`   // the grain's route (activated)

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
	// Grain call latencies (fleet.Renewal.Took of answered calls) so far.
	CallP50 time.Duration `json:"call_p50_ns,omitempty"`
	CallP99 time.Duration `json:"call_p99_ns,omitempty"`
	CallMax time.Duration `json:"call_max_ns,omitempty"`
}

// etcdProvider builds protoactor's etcd provider inside StartMember: an etcd
// client created before the member starts races with grpclog.SetLoggerV2 in
// remote.Start (PROTOACTOR.md).
type etcdProvider struct {
	endpoints []string
	p         *etcd.Provider
}

func (e *etcdProvider) build() error {
	p, err := etcd.NewWithConfig("/connactor-fleet", clientv3.Config{
		Endpoints: e.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
	})
	e.p = p
	return err
}

func (e *etcdProvider) StartMember(c *cluster.Cluster) error {
	if err := e.build(); err != nil {
		return err
	}
	return e.p.StartMember(c)
}

func (e *etcdProvider) StartClient(c *cluster.Cluster) error {
	if err := e.build(); err != nil {
		return err
	}
	return e.p.StartClient(c)
}

func (e *etcdProvider) Shutdown(graceful bool) error {
	if e.p == nil {
		return nil
	}
	return e.p.Shutdown(graceful)
}

// latencies collects grain call durations; OnRenewal adds from the keeper's
// goroutine, the status loop reads.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(r fleet.Renewal) {
	if r.Err != nil {
		return
	}
	l.mu.Lock()
	l.d = append(l.d, r.Took)
	l.mu.Unlock()
}

func (l *latencies) quantiles() (p50, p99, top time.Duration) {
	l.mu.Lock()
	d := slices.Clone(l.d)
	l.mu.Unlock()
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	return d[len(d)/2], d[len(d)*99/100], d[len(d)-1]
}

// RunMember runs one member of a fleet: a protoactor cluster member (etcd
// provider, disthash) with the budget grain's kind, a fleet.Keeper and a Pool
// against the upstream. It writes Events to out, one JSON object a line:
// "ready" once the member has started, "activated" when a budget grain
// activates here, "status" every Report, "stopped" at the end. It reads
// commands from in, one a line: "load" starts the pool's callers, "stop"
// (or the end of in) stops the member the way a service shuts down: the pool
// closes its connections, the keeper gives its share back, the member leaves
// the cluster. A member killed with SIGKILL does none of that.
func RunMember(cfg MemberConfig, in io.Reader, out io.Writer) error {
	if cfg.Report <= 0 {
		cfg.Report = 250 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var outMu sync.Mutex
	enc := json.NewEncoder(out)
	emit := func(e Event) {
		e.At = time.Now()
		outMu.Lock()
		defer outMu.Unlock()
		_ = enc.Encode(e)
	}

	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return cfg.Logger }))
	kind := fleet.NewKind(fleet.KindConfig{OnActivated: func(route string) { emit(Event{Event: "activated", Route: route}) }})
	c := cluster.New(sys, cluster.Configure(cfg.Cluster, &etcdProvider{endpoints: cfg.Etcd}, disthash.New(),
		remote.Configure("127.0.0.1", 0), cluster.WithKinds(kind)))
	c.StartMember()

	pool := NewPool(PoolConfig{System: sys, Route: "http://" + cfg.Upstream, Addr: cfg.Upstream, Callers: cfg.Callers, Logger: cfg.Logger})
	var lat latencies
	keeper, err := fleet.New(fleet.Config{Cluster: c, Budget: cfg.Budget, Floor: cfg.Floor, Supervisor: pool.PID(), OnRenewal: lat.add, Logger: cfg.Logger})
	if err != nil {
		c.Shutdown(true)
		return err
	}
	emit(Event{Event: "ready", Member: sys.ID, Address: sys.Address()})

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
				emit(status(keeper, pool, &lat))
			}
		}
	})

	scan := bufio.NewScanner(in)
	loaded := false
	for scan.Scan() {
		cmd := strings.TrimSpace(scan.Text())
		if cmd == "stop" {
			break
		}
		if cmd == "load" && !loaded {
			loaded = true
			pool.Start(keeper.PID())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = errors.Join(pool.Stop(ctx), keeper.Stop(ctx))
	close(statusDone)
	statusLoop.Wait()
	c.Shutdown(true)
	emit(Event{Event: "stopped"})
	return err
}

func status(k *fleet.Keeper, p *Pool, lat *latencies) Event {
	e := Event{Event: "status"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if s, err := k.Snapshot(ctx); err == nil {
		e.Members, e.Budget = s.Members, s.Budget
		for _, r := range s.Routes {
			e.OnFloor, e.Safe, e.Renewals, e.Failures = r.OnFloor, r.Safe, r.Renewals, r.Failures
		}
	}
	ps := p.Stats()
	e.Share, e.Held, e.Idle, e.Waiting, e.Served, e.Failed = ps.Share, ps.Held, ps.Idle, ps.Waiting, ps.Served, ps.Failed
	e.CallP50, e.CallP99, e.CallMax = lat.quantiles()
	return e
}
