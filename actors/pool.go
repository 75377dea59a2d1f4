package actors

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/conc"

	"github.com/connactor/connactor/actors/hedge"
	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/internal/mailbox"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
	"github.com/connactor/connactor/telemetry"
)

// PoolConfig configures a Pool. The client validates it and fills its
// defaults (client.Config says what each field means); NewPool takes it as
// given and nothing in it changes afterwards.
type PoolConfig struct {
	MaxConnsPerRoute      int
	MaxConnsTotal         int
	MaxConnsPerHost       int
	MaxConcurrentRequests int // > 0
	MaxPendingPerRoute    int
	MaxDialsPerRoute      int
	MaxRequestsPerConn    int
	LeaseTimeout          time.Duration
	MaxIdleTime           time.Duration
	MaxLifetime           time.Duration
	FailFast              FailFast
	ExpiryInterval        time.Duration // how often the supervisor looks for expired idle connections

	// Overload control (route_overload.go): each route's adaptive limit
	// (nil = fixed) and the queue target it sheds above (0 = off).
	Adaptive    *AdaptiveLimit
	QueueTarget time.Duration

	DialTimeout            time.Duration
	TLSConfig              *tls.Config // nil = system roots; cloned, with a session cache added when it has none
	TLSHandshakeTimeout    time.Duration
	ResponseHeaderTimeout  time.Duration
	ExpectContinueTimeout  time.Duration
	MaxResponseHeaderBytes int64
	DialContext            func(ctx context.Context, network, addr string) (net.Conn, error)
	Proxy                  func(*http.Request) (*url.URL, error) // nil = direct
	Protocols              *http.Protocols                       // nil = HTTP/1 and HTTP/2
	HTTP2                  *http.HTTP2Config
	DisableCompression     bool

	// Resolver looks up the hosts that routes dial (nil = net.DefaultResolver);
	// DNSRefresh is how often each is looked up again (> 0; negative = never:
	// every dial resolves its host, through Resolver when set). Routes to a
	// host name spread their connections over its addresses (endpoints.go),
	// unless DNSRefresh is negative, or DialContext is set without a
	// Resolver (the dialer is given the host name and decides).
	Resolver   conn.Resolver
	DNSRefresh time.Duration

	// Outlier ejects endpoints whose exchanges keep failing (RouteConfig's;
	// defaults filled); nil = none.
	Outlier *OutlierPolicy

	System *actor.ActorSystem // nil = the pool makes and owns its own
	// LoggerFactory is the protoactor logger of an actor system the pool
	// makes (actor.WithLoggerFactory).
	LoggerFactory func(*actor.ActorSystem) *slog.Logger
	Logger        *slog.Logger
	Tel           *telemetry.Telemetry // the client's (nil = none); the pool registers its gauges there
	Fault         FaultHook            // fault injection (tests only)
	Now           func() time.Time     // the route actors' clock; nil = time.Now (tests fake it)

	// Hedge is the hedging policy, with its defaults (hedge.Policy's
	// WithDefaults); nil = no request is hedged (pool_hedge.go).
	Hedge *hedge.Policy

	// StartFleet starts the node's fleet budget keeper before the supervisor,
	// told the supervisor's PID to be, and returns the keeper's PID; nil = no
	// fleet budget. StopFleet gives the shares back once every connection has
	// closed; ctx bounds it.
	StartFleet func(sys *actor.ActorSystem, supervisor *actor.PID) (*actor.PID, error)
	StopFleet  func(ctx context.Context)
}

// Pool is the connection pool behind a client: the actor system's supervisor,
// route and connection actors, and the caller's half of their protocol (see
// the package documentation for the life of a request). Its methods are safe
// for concurrent use.
type Pool struct {
	cfg       PoolConfig
	sys       *actor.ActorSystem
	ownSystem bool
	sup       *actor.PID
	supMB     *mailbox.Mailbox // the supervisor's: requests are posted here, and answered once it has stopped
	admission *wait.Semaphore  // MaxConcurrentRequests
	connOpt   conn.Options
	routeOpt  route.Options
	tel       *telemetry.Telemetry
	fleet     bool // a fleet keeper runs (PoolConfig.StartFleet)
	// measure: exchanges measure their latency from write to head for their
	// route's adaptive limit (PoolConfig.Adaptive) or its measured hedge
	// delay (PoolConfig.Hedge without a fixed Delay): Released's sample.
	measure bool

	routes sync.Map     // route.Key -> *routeHandle: the supervisor's answers, until their route stops (forgetRoute)
	owned  []*actor.PID // actors the owner spawned here (Spawn), stopped by Close before the supervisor
	ownMu  sync.Mutex   // guards owned

	wg conc.WaitGroup // dials, idle watchers and the expiry ticker
	// home makes, for callers in a testing/synctest bubble the pool is not
	// in, what the pool's goroutines use (wait.Home; Call.foreign).
	home       *wait.Home
	life       context.Context
	cancelLife context.CancelFunc
	closing    atomic.Bool
	closed     atomic.Bool // set by Close
	closeOnce  sync.Once
}

// now is the pool's clock: the route actors' (PoolConfig.Now).
func (p *Pool) now() time.Time {
	if p.cfg.Now != nil {
		return p.cfg.Now()
	}
	return time.Now()
}

// NewPool starts a pool's supervisor actor (in cfg.System, or in an actor
// system of its own). It fails only when the fleet keeper does not start;
// nothing is left running then.
func NewPool(cfg PoolConfig) (*Pool, error) {
	p := &Pool{cfg: cfg, admission: wait.NewSemaphore(cfg.MaxConcurrentRequests), tel: cfg.Tel,
		supMB: mailbox.New(SupervisorInlineBudget)}
	p.life, p.cancelLife = context.WithCancel(context.Background())
	p.home = wait.NewHome(p.wg.Go, p.life.Done()) // ends with the pool's life
	p.measure = cfg.Adaptive != nil || cfg.Hedge.Measured()
	tlsCfg := cfg.TLSConfig
	if tlsCfg == nil {
		tlsCfg = &tls.Config{}
	} else {
		tlsCfg = tlsCfg.Clone()
	}
	if tlsCfg.ClientSessionCache == nil {
		// Resumption on by default: a new connection to a known host skips the
		// full handshake.
		tlsCfg.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	}
	// Proxy credentials stay out of route keys (and so out of logs and Stats):
	// routing remembers them here and the dial looks them up.
	creds := &route.Credentials{}
	p.routeOpt = route.Options{Proxy: cfg.Proxy, Credentials: creds}
	alpn, h2c := alpnOf(cfg.Protocols)
	p.connOpt = conn.Options{
		ALPN:                   alpn,
		H2C:                    h2c,
		HTTP2:                  cfg.HTTP2,
		DialTimeout:            cfg.DialTimeout,
		TLSConfig:              tlsCfg,
		TLSHandshakeTimeout:    cfg.TLSHandshakeTimeout,
		ResponseHeaderTimeout:  cfg.ResponseHeaderTimeout,
		MaxResponseHeaderBytes: cfg.MaxResponseHeaderBytes,
		ExpectContinueTimeout:  cfg.ExpectContinueTimeout,
		DialContext:            cfg.DialContext,
		Resolver:               cfg.Resolver,
		ProxyCredentials:       creds,
		Go:                     p.wg.Go,
		Home:                   p.home,
		Logger:                 cfg.Logger,
		Fault:                  cfg.Fault,
	}
	if cfg.System != nil {
		p.sys = cfg.System
	} else {
		p.sys = actor.NewActorSystem(actor.WithLoggerFactory(cfg.LoggerFactory))
		p.ownSystem = true
	}
	supervision := NewSupervision(cfg.Logger)
	supCfg := &SupervisorConfig{
		Route: &RouteConfig{
			MaxConnsPerRoute:   cfg.MaxConnsPerRoute,
			MaxPendingPerRoute: cfg.MaxPendingPerRoute,
			MaxDialsPerRoute:   cfg.MaxDialsPerRoute,
			MaxRequestsPerConn: cfg.MaxRequestsPerConn,
			FailFast:           cfg.FailFast,
			MaxIdleTime:        cfg.MaxIdleTime,
			MaxLifetime:        cfg.MaxLifetime,
			Conn:               &p.connOpt,
			Life:               p.life,
			Logger:             cfg.Logger,
			Now:                time.Now,
			Tel:                cfg.Tel,
			Supervision:        supervision,
			Fault:              cfg.Fault,
			Endpoints:          p.endpointsConfig(),
			Outlier:            cfg.Outlier,
			Hedge:              cfg.Hedge,
			Adaptive:           cfg.Adaptive,
			QueueTarget:        cfg.QueueTarget,
		},
		MaxConnsTotal:   cfg.MaxConnsTotal,
		MaxConnsPerHost: cfg.MaxConnsPerHost,
		ExpiryInterval:  cfg.ExpiryInterval,
		Go:              p.wg.Go,
		Logger:          cfg.Logger,
		Mailbox:         p.supMB,
		RouteStopped:    p.forgetRoute,
	}
	if cfg.Now != nil {
		supCfg.Route.Now = cfg.Now
	}
	// The supervisor's PID is known before it is spawned, so that the fleet
	// keeper (which tells it the shares) can start first and the supervisor
	// find the keeper in its config.
	supName := "connactor-supervisor" + p.sys.ProcessRegistry.NextId()
	if cfg.StartFleet != nil {
		keeper, err := cfg.StartFleet(p.sys, p.sys.NewLocalPID(supName))
		if err != nil {
			p.cancelLife()
			return nil, err
		}
		supCfg.Fleet, p.fleet = keeper, keeper != nil
	}
	props := actor.PropsFromProducer(NewSupervisor(supCfg), actor.WithMailbox(p.supMB.Producer()),
		actor.WithSupervisor(supervision.Route), actor.WithGuardian(SupervisorStrategy))
	var err error
	if p.sup, err = p.sys.Root.SpawnNamed(props, supName); err != nil {
		panic("actors: internal error: supervisor name taken: " + err.Error()) // NextId is unique
	}
	p.registerGauges()
	return p, nil
}

// endpointsConfig returns the configuration of the hosts' resolvers, or nil
// when routes dial by name (see PoolConfig.Resolver).
func (p *Pool) endpointsConfig() *EndpointsConfig {
	cfg := p.cfg
	if cfg.DNSRefresh <= 0 || (cfg.DialContext != nil && cfg.Resolver == nil) {
		return nil
	}
	var res conn.Resolver = net.DefaultResolver
	if cfg.Resolver != nil {
		res = cfg.Resolver
	}
	return &EndpointsConfig{Resolver: res, Refresh: cfg.DNSRefresh, Timeout: cfg.DialTimeout, Life: p.life,
		Go: p.wg.Go, Logger: cfg.Logger}
}

// alpnOf returns the ALPN list of targets' TLS handshakes and whether http
// routes speak h2c with prior knowledge.
func alpnOf(p *http.Protocols) (alpn []string, h2c bool) {
	if p == nil {
		return conn.ALPNFor(true, true), false
	}
	h1 := p.HTTP1()
	return conn.ALPNFor(h1, p.HTTP2() || !h1), p.UnencryptedHTTP2() && !h1
}

// System returns the pool's actor system (PoolConfig.System, or its own).
func (p *Pool) System() *actor.ActorSystem { return p.sys }

// OwnsSystem reports whether the pool made its actor system (and shuts it
// down on Close).
func (p *Pool) OwnsSystem() bool { return p.ownSystem }

// Spawn spawns an actor of the pool's owner in the pool's actor system.
// Close stops it after the supervisor, once every wait has been answered.
func (p *Pool) Spawn(props *actor.Props) *actor.PID {
	pid := p.sys.Root.Spawn(props)
	p.ownMu.Lock()
	p.owned = append(p.owned, pid)
	p.ownMu.Unlock()
	return pid
}

// Life returns a context that ends when the pool closes.
func (p *Pool) Life() context.Context { return p.life }

// StopTaking marks the pool closing: it reports false when it already was.
// Requests already admitted go on; Drained tells when they are over.
func (p *Pool) StopTaking() bool { return p.closing.CompareAndSwap(false, true) }

// Closing reports whether the pool is closing or closed.
func (p *Pool) Closing() bool { return p.closing.Load() }

// Drained returns a channel closed once no admitted request holds anything
// (see Call.Admit).
func (p *Pool) Drained() <-chan struct{} { return p.admission.Drained() }

// isClosed reports whether Close has begun.
func (p *Pool) isClosed() bool { return p.closed.Load() }

// Close closes every connection now, answers every wait with ErrClosed,
// stops the pool's actors and waits for its goroutines; ctx bounds the fleet
// keeper's return of the node's shares. If the pool owns its actor system,
// the system is shut down. Later calls return ErrClosed.
//
// Every queue of waiters is answered by whoever ends it, with no channel that
// all waiters watch: the admission queue by its Close here; a route's FIFO
// by the route's Stopping, and the requests still in a route's or the
// supervisor's mailbox, or posted later, by that mailbox once its actor has
// stopped; an exchange by its connection actor, or by that actor's mailbox.
func (p *Pool) Close(ctx context.Context) error {
	err := ErrClosed
	p.closeOnce.Do(func() {
		err = nil
		p.closing.Store(true)
		p.closed.Store(true)
		p.admission.Close(ErrClosed)
		p.tel.Close() // the pool gauges' callback
		p.cancelLife()
		if ferr := p.sys.Root.StopFuture(p.sup).Wait(); ferr != nil {
			p.cfg.Logger.Warn("connactor: supervisor did not confirm stop", "err", ferr)
		}
		p.ownMu.Lock()
		owned := p.owned
		p.ownMu.Unlock()
		for _, pid := range owned {
			if ferr := p.sys.Root.StopFuture(pid).Wait(); ferr != nil {
				p.cfg.Logger.Warn("connactor: actor did not confirm stop", "actor", pid.Id, "err", ferr)
			}
		}
		if p.cfg.StopFleet != nil {
			p.cfg.StopFleet(ctx) // every socket closed and reported: the shares go back
		}
		p.wg.Wait()
		if p.ownSystem {
			p.sys.Shutdown()
		}
	})
	return err
}
