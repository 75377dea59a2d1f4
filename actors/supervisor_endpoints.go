package actors

import (
	"github.com/asynkron/protoactor-go/actor"
)

// The supervisor keeps one resolver actor per host that routes with
// endpoints dial (endpoints.go): it starts it with the host's first route,
// tells it of each route that starts and stops, stops it with the host's last
// route, and replaces it if it fails.

// hostResolver is a host's resolver and how many routes watch it.
type hostResolver struct {
	pid    *actor.PID
	routes int
}

// watchEndpoints tells the resolver of e's host, started if need be, that e
// has started; nothing for a route without endpoints.
func (s *Supervisor) watchEndpoints(ctx actor.Context, e *routeEntry) {
	host, _, ok := endpointsTarget(e.h.Key, s.cfg.Route)
	if !ok {
		return
	}
	hr := s.resolvers[host]
	if hr == nil {
		if s.resolvers == nil {
			s.resolvers, s.resolverHost = map[string]*hostResolver{}, map[string]string{}
		}
		hr = &hostResolver{pid: ctx.Spawn(actor.PropsFromProducer(newResolver(host, s.cfg.Route.Endpoints)))}
		s.resolvers[host], s.resolverHost[hr.pid.Id] = hr, host
	}
	hr.routes++
	ctx.Send(hr.pid, &EndpointsWatched{Route: e.h.PID})
}

// unwatchEndpoints tells e's resolver that e has stopped, and stops it after
// its last route.
func (s *Supervisor) unwatchEndpoints(ctx actor.Context, e *routeEntry) {
	host, _, ok := endpointsTarget(e.h.Key, s.cfg.Route)
	if !ok || s.resolvers[host] == nil {
		return
	}
	hr := s.resolvers[host]
	if hr.routes--; hr.routes > 0 {
		ctx.Send(hr.pid, &EndpointsUnwatched{Route: e.h.PID})
		return
	}
	delete(s.resolvers, host)
	delete(s.resolverHost, hr.pid.Id)
	ctx.Stop(hr.pid)
}

// resolverStopped handles the Terminated of a child that is no route: a
// resolver that failed (one the supervisor stopped was forgotten first). A new
// resolver takes its place for the host's routes, which keep their endpoints
// meanwhile.
func (s *Supervisor) resolverStopped(ctx actor.Context, who *actor.PID) {
	host, ok := s.resolverHost[who.Id]
	if !ok {
		return
	}
	delete(s.resolverHost, who.Id)
	if s.closing {
		delete(s.resolvers, host)
		return
	}
	hr := s.resolvers[host]
	hr.pid = ctx.Spawn(actor.PropsFromProducer(newResolver(host, s.cfg.Route.Endpoints)))
	s.resolverHost[hr.pid.Id] = host
	for _, e := range s.list {
		if h, _, ok := endpointsTarget(e.h.Key, s.cfg.Route); ok && h == host {
			ctx.Send(hr.pid, &EndpointsWatched{Route: e.h.PID})
		}
	}
}
