// Package client is connactor's front door: an http.RoundTripper whose
// connection pool is owned by actors. A route actor per scheme, host, port,
// proxy and caller identity owns that route's connections, idle list and FIFO
// of waiting callers; a supervisor actor enforces the limits across routes;
// a connection actor per socket does the I/O with net/http's own machinery.
// Use it as &http.Client{Transport: c}, call RoundTrip directly, hand requests
// over with Send, or send a *Request from an actor of your own (PID).
package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/conc"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/fleet"
	"github.com/connactor/connactor/internal/dispatch"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
	"github.com/connactor/connactor/telemetry"
)

// Client is an HTTP/1.1 client connection manager. It is safe for concurrent use.
type Client struct {
	userCfg   Config // as given to New (for Clone)
	cfg       Config
	sys       *actor.ActorSystem
	ownSystem bool
	sup       *actor.PID
	bridge    *actor.PID // the actor that serves callers that are actors (bridge.go)
	inc       atomic.Pointer[actors.Incarnation]
	admission *wait.Semaphore // MaxConcurrentRequests
	budget    *retryBudget    // Config.RetryBudget
	routeOpt  route.Options
	connOpt   conn.Options
	tel       *telemetry.Telemetry // spans, metrics and logs (see telemetry.go)
	keeper    *fleet.Keeper        // the node's fleet budget shares (fleet.go); nil without a fleet budget

	routes sync.Map // route.Key -> *actors.RouteHandle: the supervisor's answers, until their Done closes

	wg         conc.WaitGroup       // dials, idle watchers, the expiry ticker, actor callers' requests, Send's requests and handler workers
	disp       *dispatch.Dispatcher // Send's Handles and handler workers (dispatch.go)
	life       context.Context
	cancelLife context.CancelFunc
	closing    atomic.Bool
	closed     chan struct{} // closed by Close: every wait selects on it
	closeOnce  sync.Once
	nextID     atomic.Uint64
}

// New validates cfg, fills its defaults and starts the client's supervisor actor
// (in cfg.System, or in an actor system of its own). An invalid config returns an
// error wrapping ErrInvalidConfig and starts nothing.
func New(cfg Config) (*Client, error) {
	userCfg := cfg
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{userCfg: userCfg, cfg: cfg, closed: make(chan struct{}), admission: wait.NewSemaphore(cfg.MaxConcurrentRequests),
		budget: newRetryBudget(cfg.RetryBudget)}
	c.life, c.cancelLife = context.WithCancel(context.Background())
	c.tel = telemetry.New(telemetry.Config{TracerProvider: cfg.TracerProvider, MeterProvider: cfg.MeterProvider,
		Propagator: cfg.Propagator, Logger: cfg.Logger})
	c.disp = dispatch.New(dispatch.Config{RoundTrip: (*hooked)(c), Workers: cfg.HandlerWorkers, Go: c.wg.Go,
		Logger: cfg.Logger, Closing: c.closing.Load, ErrClosed: ErrClosed})

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
	c.routeOpt = route.Options{Proxy: cfg.Proxy, Credentials: creds}
	alpn, h2c := cfg.alpn()
	c.connOpt = conn.Options{
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
		ProxyCredentials:       creds,
		Go:                     c.wg.Go,
		Logger:                 cfg.Logger,
		Fault:                  cfg.fault,
	}

	if cfg.System != nil {
		c.sys = cfg.System // the cluster's with a Cluster (withDefaults)
	} else {
		c.sys = actor.NewActorSystem(actor.WithLoggerFactory(ProtoactorLogger(cfg.Logger)))
		c.ownSystem = true
	}
	supervision := actors.NewSupervision(cfg.Logger)
	supCfg := &actors.SupervisorConfig{
		Route: &actors.RouteConfig{
			MaxConnsPerRoute:   cfg.MaxConnsPerRoute,
			MaxPendingPerRoute: cfg.MaxPendingPerRoute,
			MaxDialsPerRoute:   cfg.MaxDialsPerRoute,
			MaxRequestsPerConn: cfg.MaxRequestsPerConn,
			FailFast: actors.FailFast{Threshold: cfg.FailFastAfter, Cooldown: cfg.FailFastCooldown,
				MaxCooldown: cfg.FailFastMaxCooldown},
			MaxIdleTime: cfg.MaxIdleTime,
			MaxLifetime: cfg.MaxLifetime,
			Conn:        &c.connOpt,
			Life:        c.life,
			Logger:      cfg.Logger,
			Now:         time.Now,
			Tel:         c.tel,
			Supervision: supervision,
			Fault:       cfg.fault,
		},
		MaxConnsTotal:   cfg.MaxConnsTotal,
		MaxConnsPerHost: cfg.MaxConnsPerHost,
		ExpiryInterval:  cfg.expiryInterval(),
		Go:              c.wg.Go,
		Logger:          cfg.Logger,
		Incarnation:     &c.inc,
	}
	// The supervisor's PID is known before it is spawned, so that the fleet
	// keeper (which tells it the shares) can start first and the supervisor
	// find the keeper in its config.
	supName := "connactor-supervisor" + c.sys.ProcessRegistry.NextId()
	if supCfg.Fleet, err = c.startFleet(supName); err != nil {
		c.cancelLife()
		c.tel.Close()
		return nil, fmt.Errorf("%w: fleet budget: %w", ErrInvalidConfig, err)
	}
	props := actor.PropsFromProducer(actors.NewSupervisor(supCfg), actor.WithMailbox(actors.SupervisorMailbox()),
		actor.WithSupervisor(supervision.Route), actor.WithGuardian(actors.SupervisorStrategy))
	if c.sup, err = c.sys.Root.SpawnNamed(props, supName); err != nil {
		panic("client: internal error: supervisor name taken: " + err.Error()) // NextId is unique
	}
	c.bridge = c.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &bridge{c: c} }))
	c.registerGauges()
	return c, nil
}

// Clone returns a new, independent Client with this client's Config as given
// to New, changed by mod (nil = unchanged). A Client's settings cannot change
// after New (libraries that type-assert *http.Transport to change TLS or
// proxies at run time find no Transport here): to change them, Clone, point
// new requests at the clone (a new http.Client, or an atomic.Pointer your
// code reads), then Shutdown the old client, which lets its requests in
// flight finish.
func (c *Client) Clone(mod func(*Config)) (*Client, error) {
	cfg := c.userCfg
	if mod != nil {
		mod(&cfg)
	}
	return New(cfg)
}

// PID returns the client's actor for callers that are actors: they send it a
// *Request with ctx.Request and receive a *Response (see Request).
func (c *Client) PID() *actor.PID { return c.bridge }

// Close closes every connection now, answers every waiting request with
// ErrClosed, stops the client's actors and waits for its goroutines. Response
// bodies still being read fail. Handles from Send that are still linked are
// aborted without a notification (Await returns an error that is both ErrAborted
// and ErrClosed); notifications already queued run, and Close waits for the
// handler workers (so a handler must not call it). Later calls return ErrClosed.
// If the client owns its actor system, the system is shut down. With a fleet
// budget, the node's shares are given back (waiting at most 10 s for the
// cluster); the cluster and its actor system are left to the service.
func (c *Client) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), fleetStopTimeout)
	defer cancel()
	return c.closeWith(ctx)
}

// closeWith is Close; ctx bounds the wait for the fleet keeper to give the
// node's shares back.
func (c *Client) closeWith(ctx context.Context) error {
	err := ErrClosed
	c.closeOnce.Do(func() {
		err = nil
		c.closing.Store(true)
		c.disp.Close() // abort Send's Handles before their requests fail with ErrClosed
		close(c.closed)
		c.tel.Close()
		c.cancelLife()
		if ferr := c.sys.Root.StopFuture(c.bridge).Wait(); ferr != nil {
			c.cfg.Logger.Warn("connactor: actor bridge did not confirm stop", "err", ferr)
		}
		if ferr := c.sys.Root.StopFuture(c.sup).Wait(); ferr != nil {
			c.cfg.Logger.Warn("connactor: supervisor did not confirm stop", "err", ferr)
		}
		c.stopFleet(ctx) // every socket closed and reported: the shares go back
		c.wg.Wait()
		if c.ownSystem {
			c.sys.Shutdown()
		}
	})
	return err
}

// Shutdown stops taking requests (new ones fail with ErrClosed), waits for the
// requests in flight to finish (their bodies read or closed), then closes
// everything as Close does. If ctx ends first, it closes at once and returns
// ctx's error. Later calls return ErrClosed.
func (c *Client) Shutdown(ctx context.Context) error {
	if !c.closing.CompareAndSwap(false, true) {
		return ErrClosed
	}
	select {
	case <-c.admission.Drained():
		c.closeWith(ctx)
		return nil
	case <-ctx.Done():
		c.Close()
		return ctx.Err()
	}
}
