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
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/conc"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/internal/dispatch"
	"github.com/connactor/connactor/telemetry"
)

// Client is an HTTP/1.1 and HTTP/2 client: an http.RoundTripper whose
// connections are pooled by actors (actors.Pool), with limits per route and
// in total. It is safe for concurrent use.
type Client struct {
	userCfg Config // as given to New (for Clone)
	cfg     Config
	pool    *actors.Pool
	bridge  *actor.PID           // the actor that serves callers that are actors (bridge.go)
	budget  *retryBudget         // Config.RetryBudget
	tel     *telemetry.Telemetry // spans, metrics and logs
	keeper  actors.FleetKeeper   // the node's fleet budget shares (fleet.go); nil without a fleet budget

	wg        conc.WaitGroup       // actor callers' requests, Send's requests and handler workers
	disp      *dispatch.Dispatcher // Send's Handles and handler workers (dispatch.go)
	closeOnce sync.Once
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
	c := &Client{userCfg: userCfg, cfg: cfg, budget: newRetryBudget(cfg.RetryBudget)}
	c.tel = telemetry.New(telemetry.Config{TracerProvider: cfg.TracerProvider, MeterProvider: cfg.MeterProvider,
		Propagator: cfg.Propagator, Logger: cfg.Logger})
	pc := actors.PoolConfig{
		MaxConnsPerRoute:      cfg.MaxConnsPerRoute,
		MaxConnsTotal:         cfg.MaxConnsTotal,
		MaxConnsPerHost:       cfg.MaxConnsPerHost,
		MaxConcurrentRequests: cfg.MaxConcurrentRequests,
		MaxPendingPerRoute:    cfg.MaxPendingPerRoute,
		MaxDialsPerRoute:      cfg.MaxDialsPerRoute,
		MaxRequestsPerConn:    cfg.MaxRequestsPerConn,
		LeaseTimeout:          cfg.LeaseTimeout,
		MaxIdleTime:           cfg.MaxIdleTime,
		MaxLifetime:           cfg.MaxLifetime,
		FailFast: actors.FailFast{Threshold: cfg.FailFastAfter, Cooldown: cfg.FailFastCooldown,
			MaxCooldown: cfg.FailFastMaxCooldown},
		ExpiryInterval:         cfg.expiryInterval(),
		QueueTarget:            cfg.QueueTarget,
		DialTimeout:            cfg.DialTimeout,
		TLSConfig:              cfg.TLSConfig,
		TLSHandshakeTimeout:    cfg.TLSHandshakeTimeout,
		ResponseHeaderTimeout:  cfg.ResponseHeaderTimeout,
		ExpectContinueTimeout:  cfg.ExpectContinueTimeout,
		MaxResponseHeaderBytes: cfg.MaxResponseHeaderBytes,
		DialContext:            cfg.DialContext,
		Resolver:               cfg.Resolver,
		DNSRefresh:             cfg.DNSRefresh,
		Proxy:                  cfg.Proxy,
		Protocols:              cfg.Protocols,
		HTTP2:                  cfg.HTTP2,
		DisableCompression:     cfg.DisableCompression,
		System:                 cfg.System, // the fleet's with a Fleet (withDefaults)
		LoggerFactory:          ProtoactorLogger(cfg.Logger),
		Logger:                 cfg.Logger,
		Tel:                    c.tel,
		Fault:                  cfg.fault,
		Outlier:                cfg.outlierPolicy(),
		Hedge:                  cfg.hedgePolicy(),
	}
	if a := cfg.Adaptive; a != nil {
		pc.Adaptive = &actors.AdaptiveLimit{Min: a.Min, Initial: a.Initial}
	}
	if cfg.Fleet != nil {
		pc.StartFleet, pc.StopFleet = c.startFleet, c.stopFleet
	}
	if c.pool, err = actors.NewPool(pc); err != nil {
		return nil, fmt.Errorf("%w: fleet budget: %w", ErrInvalidConfig, err)
	}
	c.disp = dispatch.New(dispatch.Config{RoundTrip: (*hooked)(c), Workers: cfg.HandlerWorkers, Go: c.wg.Go,
		Logger: cfg.Logger, Closing: c.pool.Closing, ErrClosed: ErrClosed})
	c.bridge = c.pool.Spawn(actor.PropsFromProducer(func() actor.Actor { return &bridge{c: c} }))
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
		c.pool.StopTaking()
		c.disp.Close()    // abort Send's Handles before their requests fail with ErrClosed
		c.pool.Close(ctx) // stops the bridge too

		c.wg.Wait()
	})
	return err
}

// Shutdown stops taking requests (new ones fail with ErrClosed), waits for the
// requests in flight to finish (their bodies read or closed), then closes
// everything as Close does. If ctx ends first, it closes at once and returns
// ctx's error. Later calls return ErrClosed.
func (c *Client) Shutdown(ctx context.Context) error {
	if !c.pool.StopTaking() {
		return ErrClosed
	}
	select {
	case <-c.pool.Drained():
		c.closeWith(ctx)
		return nil
	case <-ctx.Done():
		c.Close()
		return ctx.Err()
	}
}
