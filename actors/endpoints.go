package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
)

// Endpoints: a route spreads its connections over the addresses its host
// resolves to, and follows DNS when the answer changes. A resolver actor per
// host (a child of the supervisor, shared by the host's routes) looks the host
// up every Refresh (jittered), and sooner when a route's dial to one of its
// addresses fails; it sends each route the set (EndpointsResolved), and a
// lookup that fails or finds nothing keeps the last good one. The route keeps
// its endpoint set (endpointset.go, route_endpoints.go): where its new
// connections go, which addresses are ejected and which drain. Nothing is
// looked up on the request path: a route's first connections wait for its
// host's first lookup, as a dial by name waits for its own.

// EndpointsConfig configures the resolvers of a pool's hosts
// (RouteConfig.Endpoints; nil = every route dials by name). It is read-only.
type EndpointsConfig struct {
	Resolver conn.Resolver // looks the hosts up; never nil
	Refresh  time.Duration // between a host's lookups, ±10% (> 0)
	Timeout  time.Duration // bounds one lookup (> 0)
	Life     context.Context
	// Go starts a goroutine owned by the client (the lookups), which waits
	// for them on Close: a Resolver must return when its context ends.
	Go     func(func())
	Logger *slog.Logger
	Rand   func() float64 // draws from [0, 1) (jitter); nil = math/rand/v2
}

// ResolveSoonGap is the least time between a host's lookups that dials failing
// to connect ask for (ResolveSoon): a burst of failures costs one lookup.
const ResolveSoonGap = time.Second

// endpointsTarget returns the host a route's connections are dialed to (the
// target's, or through a proxy the proxy's) and its port, and whether the
// route has endpoints: endpoints are on, and the host is a name, not an IP
// literal.
func endpointsTarget(k route.Key, cfg *RouteConfig) (host string, port uint16, ok bool) {
	if cfg.Endpoints == nil {
		return "", 0, false
	}
	addr := k.Addr()
	if k.Proxy != "" {
		addr = k.ProxyAddr()
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return "", 0, false
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, false
	}
	return h, uint16(n), true
}

// errNoAddress is a lookup's error when it found no address.
var errNoAddress = errors.New("no address")

// resolver is a host's resolver actor: it looks the host up and tells the
// host's routes (EndpointsResolved). One lookup at a time runs, on a goroutine
// of the client's, bounded by EndpointsConfig.Timeout; the actor itself never
// blocks.
type resolver struct {
	host string
	cfg  *EndpointsConfig
	sys  *actor.ActorSystem
	self *actor.PID

	routes map[string]*actor.PID // the host's routes, by PID Id
	last   *EndpointsResolved    // the last answer (nil before the first lookup ends)
	addrs  []netip.Addr          // the last good set
	at     time.Time             // when it was looked up
	// failing is true while lookups fail (logged once per change); retry is
	// how long after a failed lookup the next one goes (1 s, doubling up to
	// Refresh).
	failing bool
	retry   time.Duration

	looking bool               // a lookup runs
	cancel  context.CancelFunc // ... and this cancels it (on Stopping)
	begun   time.Time          // when the last lookup began
	soon    bool               // a ResolveSoon waits for the next lookup
	timer   *time.Timer        // the next lookup's (nil when none is set)
	due     time.Time          // ... when it fires
	gen     uint64             // the timer's generation (lookupDue.Gen)
}

// newResolver returns the producer of host's resolver.
func newResolver(host string, cfg *EndpointsConfig) actor.Producer {
	return func() actor.Actor {
		return &resolver{host: host, cfg: cfg, routes: map[string]*actor.PID{}}
	}
}

// Receive handles the resolver's messages.
func (r *resolver) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *EndpointsWatched:
		r.routes[m.Route.Id] = m.Route
		if r.last != nil {
			ctx.Send(m.Route, r.last)
		}
	case *EndpointsUnwatched:
		delete(r.routes, m.Route.Id)
	case *ResolveSoon:
		r.onResolveSoon()
	case *lookupDue:
		if m.gen == r.gen {
			r.timer = nil
			r.lookup()
		}
	case *lookedUp:
		r.onLookedUp(ctx, m)
	case *actor.Started:
		r.sys, r.self = ctx.ActorSystem(), ctx.Self()
		r.lookup()
	case *actor.Stopping:
		if r.timer != nil {
			r.timer.Stop()
		}
		if r.cancel != nil {
			r.cancel()
		}
	case *actor.Stopped, *actor.Restarting:
	default:
		r.cfg.Logger.Warn("resolver: unknown message", "host", r.host, "type", fmt.Sprintf("%T", m))
	}
}

// lookup starts a lookup of the host, unless one runs.
func (r *resolver) lookup() {
	if r.looking {
		return
	}
	r.looking, r.soon, r.begun = true, false, time.Now()
	lctx, cancel := context.WithTimeout(r.cfg.Life, r.cfg.Timeout)
	r.cancel = cancel
	sys, self, host, res := r.sys, r.self, r.host, r.cfg.Resolver
	r.cfg.Go(func() { // owned by the client: ends with the lookup, which its context bounds
		defer cancel()
		addrs, err := res.LookupNetIP(lctx, "ip", host)
		sys.Root.Send(self, &lookedUp{addrs: addrs, err: err})
	})
}

// onResolveSoon looks the host up at once, or once ResolveSoonGap has passed
// since the last lookup began.
func (r *resolver) onResolveSoon() {
	r.soon = true
	if r.looking {
		return // its end schedules the next
	}
	if wait := ResolveSoonGap - time.Since(r.begun); wait > 0 {
		r.schedule(wait)
		return
	}
	r.lookup()
}

// onLookedUp keeps a lookup's set, or the last good one when it failed or
// found nothing; tells the routes; and sets the next lookup.
func (r *resolver) onLookedUp(ctx actor.Context, m *lookedUp) {
	r.looking, r.cancel = false, nil
	addrs, err := usable(m.addrs), m.err
	if err == nil && len(addrs) == 0 {
		err = errNoAddress
	}
	if err != nil {
		err = fmt.Errorf("connactor: resolving %s: %w", r.host, err)
		if !r.failing {
			r.failing = true
			r.cfg.Logger.Warn("connactor: resolving a host fails; its routes keep its last addresses",
				"host", r.host, "addresses", len(r.addrs), "err", err)
		}
		r.retry = min(max(2*r.retry, time.Second), r.cfg.Refresh)
	} else {
		if r.failing {
			r.failing = false
			r.cfg.Logger.Info("connactor: resolving a host succeeds again", "host", r.host, "addresses", len(addrs))
		}
		if !slices.Equal(addrs, r.addrs) {
			r.cfg.Logger.Debug("connactor: a host's addresses changed", "host", r.host, "from", r.addrs, "to", addrs)
		}
		r.addrs, r.at, r.retry = addrs, time.Now(), 0
	}
	r.last = &EndpointsResolved{From: r.self, Addrs: r.addrs, At: r.at, Err: err}
	for _, pid := range r.routes {
		ctx.Send(pid, r.last)
	}
	next := time.Duration(float64(r.cfg.Refresh) * (0.9 + 0.2*r.rand()))
	if r.retry > 0 {
		next = min(next, r.retry)
	}
	if r.soon {
		next = max(ResolveSoonGap-time.Since(r.begun), 0)
	}
	r.schedule(next)
}

// schedule sets the next lookup after d, unless one is set sooner.
func (r *resolver) schedule(d time.Duration) {
	due := time.Now().Add(d)
	if r.timer != nil {
		if !due.Before(r.due) {
			return
		}
		r.timer.Stop()
	}
	r.gen++
	gen, sys, self := r.gen, r.sys, r.self
	r.due = due
	// The timer's goroutine only sends: a message that arrives after the
	// actor stopped is a dead letter.
	r.timer = time.AfterFunc(d, func() { sys.Root.Send(self, &lookupDue{gen: gen}) })
}

// rand draws uniformly from [0, 1).
func (r *resolver) rand() float64 {
	if r.cfg.Rand != nil {
		return r.cfg.Rand()
	}
	return rand.Float64()
}

// usable returns a lookup's addresses as dials use them: IPv4-mapped IPv6
// addresses as IPv4, each once, in the resolver's order; invalid ones left out.
func usable(addrs []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if a.IsValid() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}
