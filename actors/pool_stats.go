package actors

import (
	"time"

	"github.com/connactor/connactor/route"
	"github.com/connactor/connactor/telemetry"
)

// PoolStats is a snapshot of the pool: the supervisor's counts, each route's
// answer (with its handle, in the same order) and the admission's counts.
type PoolStats struct {
	Supervisor       StatsResponse
	Routes           []RouteStatsResponse
	Handles          []*RouteHandle
	InFlight         int // requests admitted under MaxConcurrentRequests
	PendingAdmission int // requests waiting for admission
}

// Stats returns a snapshot of the pool: the supervisor names its routes, then
// each route actor reports its own counts by message (each route's numbers are
// consistent; routes are read one after the other). It blocks for two message
// round trips and is safe for concurrent use. On a closed pool it reports
// false.
func (p *Pool) Stats() (PoolStats, bool) {
	if p.isClosed() {
		return PoolStats{}, false
	}
	sr, ok := p.supervisorStats()
	if !ok {
		return PoolStats{}, false
	}
	st := PoolStats{Supervisor: sr}
	st.InFlight, st.PendingAdmission = p.admission.Held()
	replies := make([]chan RouteStatsResponse, len(sr.Routes))
	for i, h := range sr.Routes {
		replies[i] = make(chan RouteStatsResponse, 1)
		p.sys.Root.Send(h.PID, &RouteStatsRequest{Reply: replies[i]})
	}
	for i, h := range sr.Routes {
		select {
		case r := <-replies[i]:
			st.Routes, st.Handles = append(st.Routes, r), append(st.Handles, h)
		case <-h.Done:
			// Stopped under us. An answer sent before it stopped is there.
			select {
			case r := <-replies[i]:
				st.Routes, st.Handles = append(st.Routes, r), append(st.Handles, h)
			default:
			}
		case <-p.closed:
			return PoolStats{}, false
		}
	}
	return st, true
}

// supervisorStats asks the supervisor for its counts and its routes; false
// when the pool closed meanwhile.
func (p *Pool) supervisorStats() (StatsResponse, bool) {
	reply := make(chan StatsResponse, 1)
	p.sys.Root.Send(p.sup, &StatsRequest{Reply: reply})
	select {
	case sr := <-reply:
		return sr, true
	case <-p.closed:
		return StatsResponse{}, false
	}
}

// CloseIdle closes every idle connection of every route now (connections in
// use are left alone and stay pooled). It blocks until every route has closed
// its idle connections, and is safe for concurrent use. On a closed pool it
// does nothing.
func (p *Pool) CloseIdle() {
	if p.isClosed() {
		return
	}
	sr, ok := p.supervisorStats()
	if !ok {
		return
	}
	replies := make([]chan int, len(sr.Routes))
	for i, h := range sr.Routes {
		replies[i] = make(chan int, 1)
		p.sys.Root.Send(h.PID, &CloseIdleRequest{Reply: replies[i]})
	}
	for i, h := range sr.Routes {
		select {
		case <-replies[i]:
		case <-h.Done:
		case <-p.closed:
			return
		}
	}
}

// registerGauges registers the pool gauges' callback with the client's meter.
// The callback reads only the counters the route actors publish
// (RoutePublished) and the admission semaphore: it never messages or waits for an actor, so a slow or
// stuck collection cannot hold the pool up, and the pool cannot hold up a
// collection.
func (p *Pool) registerGauges() {
	err := p.tel.RegisterPool(p.routeReadings, func() int64 { _, waiting := p.admission.Held(); return int64(waiting) })
	if err != nil {
		p.cfg.Logger.Warn("connactor: pool gauges not registered", "err", err)
	}
}

// routeReadings yields the published counters of every live route the pool
// knows (every route a request went to).
func (p *Pool) routeReadings(yield func(telemetry.RouteReading) bool) {
	p.routes.Range(func(k, v any) bool {
		h := v.(*RouteHandle)
		select {
		case <-h.Done:
			return true
		default:
		}
		key := k.(route.Key)
		return yield(telemetry.RouteReading{
			Route:       p.tel.Route(key.Scheme, key.Host, key.Port),
			Active:      int64(h.Pub.Leased.Load()),
			Idle:        int64(h.Pub.Idle.Load()),
			Pending:     int64(h.Pub.Pending.Load()),
			FailFast:    h.Pub.FailFast.Load(),
			LearnedIdle: time.Duration(h.Pub.LearnedIdle.Load()),
			Fleet:       p.fleet,
			FleetShare:  int64(h.Fleet.Share.Load()),
		})
	})
}
