package client

import (
	"time"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/route"
	"github.com/connactor/connactor/telemetry"
)

// registerGauges registers the pool gauges' callback with the client's meter.
// The callback reads only the counters the route actors publish
// (RoutePublished) and the admission semaphore: it never messages or waits for an actor, so a slow or
// stuck collection cannot hold the pool up, and the pool cannot hold up a
// collection.
func (c *Client) registerGauges() {
	err := c.tel.RegisterPool(c.routeReadings, func() int64 { _, waiting := c.admission.Held(); return int64(waiting) })
	if err != nil {
		c.cfg.Logger.Warn("connactor: pool gauges not registered", "err", err)
	}
}

// routeReadings yields the published counters of every live route the front
// door knows (every route a request went to).
func (c *Client) routeReadings(yield func(telemetry.RouteReading) bool) {
	c.routes.Range(func(k, v any) bool {
		h := v.(*actors.RouteHandle)
		select {
		case <-h.Done:
			return true
		default:
		}
		key := k.(route.Key)
		return yield(telemetry.RouteReading{
			Route:       c.tel.Route(key.Scheme, key.Host, key.Port),
			Active:      int64(h.Pub.Leased.Load()),
			Idle:        int64(h.Pub.Idle.Load()),
			Pending:     int64(h.Pub.Pending.Load()),
			FailFast:    h.Pub.FailFast.Load(),
			LearnedIdle: time.Duration(h.Pub.LearnedIdle.Load()),
			Fleet:       c.keeper != nil,
			FleetShare:  int64(h.Fleet.Share.Load()),
		})
	})
}
