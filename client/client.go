// Package client is connactor's front door: an http.RoundTripper whose
// connection pool is owned by actors (see the actors package). Use it as
// &http.Client{Transport: c} for redirects, cookies and timeouts, call RoundTrip
// directly, or send it a Request from an actor of your own.
package client

import (
	"context"
	"crypto/tls"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/sourcegraph/conc"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
	"github.com/connactor/connactor/telemetry"
)

// Client is an HTTP/1.1 client connection manager. It is safe for concurrent use.
type Client struct {
	cfg       Config
	sys       *actor.ActorSystem
	ownSystem bool
	sup       *actor.PID
	pub       *actors.SupervisorPublished
	routeOpt  route.Options
	connOpt   conn.Options
	tel       *telemetry.Telemetry // spans, metrics and logs (see telemetry.go)

	routes sync.Map // route.Key -> *actors.RouteHandle: a cache of the supervisor's answers

	wg         conc.WaitGroup // dials, idle watchers, the expiry ticker, actor callers' requests, Send's requests and handler workers
	disp       dispatcher     // Send's Handles and handler workers (dispatch.go)
	life       context.Context
	cancelLife context.CancelFunc
	closing    atomic.Bool
	closedCh   chan struct{}
	stoppedCh  chan struct{} // closed by Close once the actors have stopped: unanswered messages stay so
	closeOnce  sync.Once
	nextID     atomic.Uint64
	deadLetter *eventstream.Subscription
}

// New validates cfg, fills its defaults and starts the client's supervisor actor
// (in cfg.System, or in an actor system of its own). An invalid config returns an
// error wrapping ErrInvalidConfig and starts nothing.
func New(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, closedCh: make(chan struct{}), stoppedCh: make(chan struct{}), pub: &actors.SupervisorPublished{}}
	c.life, c.cancelLife = context.WithCancel(context.Background())
	c.tel = telemetry.New(telemetry.Config{TracerProvider: cfg.TracerProvider, MeterProvider: cfg.MeterProvider,
		Propagator: cfg.Propagator, Logger: cfg.Logger})
	c.disp.init(c)

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
	c.connOpt = conn.Options{
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
	}

	if cfg.System != nil {
		c.sys = cfg.System
	} else {
		c.sys = actor.NewActorSystem(actor.WithLoggerFactory(ProtoactorLogger(cfg.Logger)))
		c.ownSystem = true
	}
	supCfg := &actors.SupervisorConfig{
		Route: &actors.RouteConfig{
			MaxConnsPerRoute: cfg.MaxConnsPerRoute,
			MaxIdleTime:      cfg.MaxIdleTime,
			MaxLifetime:      cfg.MaxLifetime,
			Conn:             &c.connOpt,
			Life:             c.life,
			Logger:           cfg.Logger,
			Now:              time.Now,
			Sup:              c.pub,
			Tel:              c.tel,
		},
		MaxConnsTotal:         cfg.MaxConnsTotal,
		MaxConcurrentRequests: cfg.MaxConcurrentRequests,
		ExpiryInterval:        cfg.expiryInterval(),
		Pub:                   c.pub,
		Go:                    c.wg.Go,
		Serve:                 c.RoundTrip,
		Logger:                cfg.Logger,
	}
	props := actor.PropsFromProducer(actors.NewSupervisor(supCfg), actor.WithSupervisor(actors.RouteStrategy))
	c.sup = c.sys.Root.Spawn(props)
	c.registerGauges()
	// A lease sent to a route actor that stopped at that moment would never be
	// answered: answer it from the dead letters so the caller re-routes.
	c.deadLetter = c.sys.EventStream.Subscribe(func(evt any) {
		if dl, ok := evt.(*actor.DeadLetterEvent); ok {
			if m, ok := dl.Message.(*actors.LeaseRequest); ok {
				select {
				case m.Reply <- actors.LeaseResponse{Err: actors.ErrRouteClosed}:
				default:
				}
			}
		}
	})
	return c, nil
}

// PID returns the supervisor actor's PID, for callers that are actors: they send
// it a *Request with ctx.Request and receive a *Response.
func (c *Client) PID() *actor.PID { return c.sup }

// Close closes every connection now, answers every waiting request with
// ErrClosed, stops the client's actors and waits for its goroutines. Response
// bodies still being read fail. Handles from Send that are still linked are
// aborted without a notification (Await returns an error that is both ErrAborted
// and ErrClosed); notifications already queued run, and Close waits for the
// handler workers (so a handler must not call it). Later calls return ErrClosed.
// If the client owns its actor system, the system is shut down.
func (c *Client) Close() error {
	err := ErrClosed
	c.closeOnce.Do(func() {
		err = nil
		c.closing.Store(true)
		c.disp.close() // abort Send's Handles before their requests fail with ErrClosed
		close(c.closedCh)
		c.tel.Close()
		c.cancelLife()
		if ferr := c.sys.Root.StopFuture(c.sup).Wait(); ferr != nil {
			c.cfg.Logger.Warn("connactor: supervisor did not confirm stop", "err", ferr)
		}
		close(c.stoppedCh)
		c.wg.Wait()
		c.sys.EventStream.Unsubscribe(c.deadLetter)
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
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for c.pub.InFlight.Load() > 0 {
		select {
		case <-ctx.Done():
			c.Close()
			return ctx.Err()
		case <-t.C:
		}
	}
	c.Close()
	return nil
}

// Stats returns a snapshot of the pool: the supervisor names its routes, then
// each route actor reports its own counts by message (each route's numbers are
// consistent; routes are read one after the other). It blocks for two message
// round trips and is safe for concurrent use. On a closed client it returns the
// zero Stats.
func (c *Client) Stats() Stats {
	if c.closing.Load() && c.isClosed() {
		return Stats{}
	}
	reply := make(chan actors.StatsResponse, 1)
	c.sys.Root.Send(c.sup, &actors.StatsRequest{Reply: reply})
	var sr actors.StatsResponse
	select {
	case sr = <-reply:
	case <-c.closedCh:
		return Stats{}
	}
	rs := make(chan actors.RouteStats, len(sr.Routes))
	asked := 0
	for _, h := range sr.Routes {
		if h.Pub.Stopped.Load() {
			continue
		}
		c.sys.Root.Send(h.PID, &actors.RouteStatsRequest{Reply: rs})
		asked++
	}
	st := Stats{MaxConnsTotal: sr.MaxTotal, Connections: sr.Total, Evictions: sr.Evictions, Expired: sr.Expired,
		PendingPermits: sr.PermitWaiters, PendingAdmission: sr.AdmitWaiters,
		InFlight: int(c.pub.InFlight.Load())}
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for i := 0; i < asked; i++ {
		select {
		case r := <-rs:
			st.Routes = append(st.Routes, routeStats(r))
		case <-c.closedCh:
			return Stats{}
		case <-timeout.C:
			i = asked // a route stopped under us; report what we have
		}
	}
	sort.Slice(st.Routes, func(i, j int) bool { return st.Routes[i].Route < st.Routes[j].Route })
	for _, r := range st.Routes {
		st.Open += r.Open
		st.Leased += r.Leased
		st.Idle += r.Idle
		st.Pending += r.Pending
		st.OldestLease = max(st.OldestLease, r.OldestLease)
	}
	return st
}

func (c *Client) isClosed() bool {
	select {
	case <-c.closedCh:
		return true
	default:
		return false
	}
}

// ProtoactorLogger returns a logger factory for actor.WithLoggerFactory that
// sends protoactor's own logs to l (instead of its colored console logger),
// tagged lib=protoactor. Embedding services that pass Config.System should build
// their system with it.
func ProtoactorLogger(l *slog.Logger) func(*actor.ActorSystem) *slog.Logger {
	return func(*actor.ActorSystem) *slog.Logger { return l.With("lib", "protoactor") }
}
