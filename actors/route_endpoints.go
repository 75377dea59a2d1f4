package actors

import (
	"net/netip"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
)

// routeEndpoints is a route's side of its host's endpoints (endpoints.go):
// its endpoint set and what its resolver last said. Route state: touched only
// in the route's Receive.
type routeEndpoints struct {
	on       bool   // the route has endpoints (endpointsTarget)
	port     uint16 // the port its connections are dialed to
	known    bool   // the resolver has answered once
	set      endpointSet
	resolver *actor.PID // the host's resolver (EndpointsResolved.From)
	at       time.Time  // the last successful lookup
	err      string     // the last lookup's error ("" when it succeeded)
	// changed is set where the set's addresses or their open counts change
	// (a new set, a dial, a move, a close) and cleared when publishEndpoints
	// has stored them: most messages (a lease, a release) change neither.
	changed bool
}

// newRouteEndpoints returns the endpoints of route k.
func newRouteEndpoints(k route.Key, cfg *RouteConfig) routeEndpoints {
	_, port, on := endpointsTarget(k, cfg)
	return routeEndpoints{on: on, port: port, set: endpointSet{outlier: cfg.Outlier}}
}

// awaiting reports whether the route waits for its host's first lookup: it
// dials nothing until then (a dial by name would wait for a lookup too).
func (e *routeEndpoints) awaiting() bool { return e.on && !e.known }

// onEndpointsResolved takes the resolver's answer: a new set drains the
// addresses that left it (their idle connections close now, the others as
// they come free: retireReason), and counts the connections dialed by name
// before a set was known at their addresses.
func (r *Route) onEndpointsResolved(ctx actor.Context, m *EndpointsResolved) {
	e := &r.eps
	if !e.on {
		return
	}
	e.known, e.resolver, e.at = true, m.From, m.At
	e.err = ""
	if m.Err != nil {
		e.err = m.Err.Error()
	}
	if len(m.Addrs) == 0 || e.same(m.Addrs) {
		return
	}
	addrs := make([]netip.AddrPort, len(m.Addrs))
	for i, a := range m.Addrs {
		addrs[i] = netip.AddrPortFrom(a, e.port)
	}
	e.set.update(addrs)
	e.changed = true
	for _, cs := range r.conns {
		if cs.ep == nil && cs.peer.IsValid() {
			cs.ep = e.set.adopt(cs.peer)
			cs.ep.open++
		}
	}
	r.takeBack()               // an idle connection on offer to a drained address closes too
	r.onExpire(ctx, r.clock()) // the idle ones to drained addresses retire (retireReason)
}

// same reports whether addrs are the live set's addresses, in order.
func (e *routeEndpoints) same(addrs []netip.Addr) bool {
	live := e.set.list
	for i, a := range addrs {
		if i >= len(live) || live[i].draining || live[i].addr != netip.AddrPortFrom(a, e.port) {
			return false
		}
	}
	return len(addrs) == len(live) || live[len(addrs)].draining
}

// dialTo picks where a new connection of the route goes (endpointSet.pick)
// and counts it there; the zero Endpoints (a dial by name) when the route has
// no endpoint known.
func (r *Route) dialTo() (conn.Endpoints, *endpoint) {
	if !r.eps.on {
		return conn.Endpoints{}, nil
	}
	primary, fallback := r.eps.set.pick(r.clock(), r.rand)
	if primary == nil {
		return conn.Endpoints{}, nil
	}
	r.eps.set.dialing(primary)
	r.eps.changed = true
	to := conn.Endpoints{Primary: primary.addr}
	if fallback != nil {
		to.Fallback = fallback.addr
	}
	return to, primary
}

// endpointDialed records where a connection went: the fallback of its dial
// if that won, or, for a dial by name, the address it reached (adopted as
// draining if it is not in the set).
func (r *Route) endpointDialed(cs *connState, m *conn.Dialed) {
	cs.peer = m.Peer
	e := &r.eps
	switch {
	case !e.on || !m.Peer.IsValid():
	case cs.ep == nil:
		if !e.set.empty() {
			cs.ep = e.set.adopt(m.Peer)
			cs.ep.open++
			e.changed = true
		}
	case cs.ep.addr != m.Peer:
		if to := e.set.find(m.Peer); to != nil {
			e.set.moved(cs.ep, to)
			cs.ep = to
			e.changed = true
		}
	}
	if cs.ep != nil && e.set.connected(cs.ep) {
		r.cfg.Logger.Info("connactor: a route's dials to an address connect again", "route", r.name, "addr", cs.ep.addr)
	}
}

// endpointDialFailed ejects the endpoints whose connect failed and asks the
// resolver to look the host up again (the address may be gone). It reports
// whether another endpoint remains to dial instead: the route's waiters then
// wait for that dial, as net.Dialer goes on to a host's next address, rather
// than fail. A dial that failed after its connect (TLS, a proxy's refusal)
// ejects nothing.
func (r *Route) endpointDialFailed(ctx actor.Context, cs *connState, m *conn.Dialed) bool {
	if !r.eps.on {
		return false
	}
	set, now, ejected := &r.eps.set, r.clock(), false
	for _, a := range [2]netip.AddrPort{m.Failed.Primary, m.Failed.Fallback} {
		e := set.find(a)
		if !a.IsValid() || e == nil {
			continue
		}
		if e != cs.ep {
			e.dials++ // the fallback was dialed too
		}
		if ejected = true; set.failed(e, now, r.rand()) {
			r.cfg.Logger.Warn("connactor: a route's dials to an address fail; it is left alone for a while",
				"route", r.name, "addr", a, "until", e.ejectedUntil.Sub(now).Round(time.Millisecond), "err", m.Err)
		}
	}
	if !ejected {
		return false
	}
	if r.eps.resolver != nil {
		ctx.Send(r.eps.resolver, resolveSoon)
	}
	return set.usable(now)
}

// dialPeer is the address a failed dial went to, for telemetry: where its
// TCP connection went before a later step failed, or the endpoint that
// refused it; zero for a dial by name that connected nowhere.
func dialPeer(m *conn.Dialed) netip.AddrPort {
	if m.Peer.IsValid() {
		return m.Peer
	}
	return m.Failed.Primary
}

// endpointClosed counts out a closed connection (or failed dial) of its
// endpoint.
func (r *Route) endpointClosed(cs *connState) {
	if cs.ep != nil {
		r.eps.set.closed(cs.ep)
		r.eps.changed = true
		cs.ep = nil
	}
}

// endpointStats returns the route's endpoints with their leased and idle
// connections.
func (r *Route) endpointStats() []route.EndpointStats {
	st := r.eps.set.stats(r.clock())
	for i := range st {
		st[i].Streams = r.endpointStreams(r.eps.set.list[i])
		for _, cs := range r.conns {
			if cs.ep == nil || cs.ep.addr != st[i].Addr {
				continue
			}
			switch {
			case cs.phase == phaseIdle || cs.phase == phaseOffered: // on offer: idle, unless a caller took it since
				st[i].Idle++
			case cs.phase == phaseLeased:
				st[i].Leased++
			}
		}
	}
	return st
}

// publishEndpoints stores each endpoint's open connections for the gauges
// (routePublished.Endpoints) when the set or a count changed since the last
// store (routeEndpoints.changed): a dial, a close or a new resolution, not a
// lease or a release.
func (r *Route) publishEndpoints() {
	if !r.eps.changed {
		return
	}
	r.eps.changed = false
	list := r.eps.set.list
	out := make([]route.EndpointStats, len(list))
	for i, e := range list {
		out[i] = route.EndpointStats{Addr: e.addr, Open: e.open}
	}
	r.pub.Endpoints.Store(&out)
}
