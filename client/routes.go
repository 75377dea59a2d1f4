package client

import (
	"fmt"

	"github.com/connactor/connactor/actors"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

// routeFor returns the route actor of key: from the cache while its Done is
// open, otherwise by asking the supervisor (a RouteRequest, once per route).
func (c *Client) routeFor(l *waitLimit, key route.Key) (*actors.RouteHandle, error) {
	if v, ok := c.routes.Load(key); ok {
		h := v.(*actors.RouteHandle)
		select {
		case <-h.Done:
			c.routes.CompareAndDelete(key, h) // its actor stopped: ask for a new one
		default:
			return h, nil
		}
	}
	inc, why := c.incarnation(l)
	if why != served {
		return nil, l.waitErr(why, "its route")
	}
	var gone <-chan struct{}
	if inc != nil {
		gone = inc.Done()
	}
	t := &wait.Ticket[*actors.RouteHandle]{}
	c.sys.Root.Send(c.sup, &actors.RouteRequest{Key: key, Ticket: t})
	h, err, why := await(l, t, gone)
	switch {
	case why == byServerGone:
		// Not asked again of the successor: the request may be what made
		// the supervisor fail, and asking again would fail it again.
		return nil, notSent(fmt.Errorf("connactor: %w while starting the route of %s", actors.ErrSupervisorFailed, l.target()))
	case why != served:
		return nil, l.waitErr(why, "its route")
	case err != nil:
		return nil, ErrClosed // the supervisor is closing
	}
	c.routes.Store(key, h)
	return h, nil
}

// incarnation returns the supervisor's current incarnation, waiting through a
// restart: an incarnation that ended for one is followed by the restarted
// instance's (Incarnation.Successor), which answers what was sent to the
// supervisor meanwhile. Without the wait, every request in that window (the
// old instance's routes stop first) failed with ErrSupervisorFailed.
func (c *Client) incarnation(l *waitLimit) (*actors.Incarnation, gaveUp) {
	for {
		inc := c.inc.Load()
		if inc == nil {
			return nil, served
		}
		next, restarting := inc.Successor()
		if !restarting {
			return inc, served
		}
		if why := l.until(next, nil); why != served {
			return nil, why
		}
	}
}
