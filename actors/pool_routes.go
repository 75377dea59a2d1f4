package actors

import (
	"fmt"

	"github.com/connactor/connactor/internal/wait"
)

// routeFor returns the route actor of the call's key: from the cache while
// its Done is open, otherwise by asking the supervisor (a RouteRequest, once
// per route).
func (l *Call) routeFor() (*routeHandle, error) {
	p, key := l.p, l.key
	if v, ok := p.routes.Load(key); ok {
		h := v.(*routeHandle)
		select {
		case <-h.Done:
			p.routes.CompareAndDelete(key, h) // its actor stopped: ask for a new one
		default:
			return h, nil
		}
	}
	inc, why := l.incarnation()
	if why != served {
		return nil, l.waitErr(why, "its route")
	}
	var gone <-chan struct{}
	if inc != nil {
		gone = inc.Done()
	}
	t := &wait.Ticket[*routeHandle]{}
	p.sys.Root.Send(p.sup, &RouteRequest{Key: key, Ticket: t})
	h, err, why := await(l, t, gone)
	switch {
	case why == byServerGone:
		// Not asked again of the successor: the request may be what made
		// the supervisor fail, and asking again would fail it again.
		return nil, NotSent(fmt.Errorf("connactor: %w while starting the route of %s", ErrSupervisorFailed, l.target()))
	case why != served:
		return nil, l.waitErr(why, "its route")
	case err != nil:
		return nil, ErrClosed // the supervisor is closing
	}
	p.routes.Store(key, h)
	return h, nil
}

// incarnation returns the supervisor's current incarnation, waiting through a
// restart: an incarnation that ended for one is followed by the restarted
// instance's (Incarnation.Successor), which answers what was sent to the
// supervisor meanwhile. Without the wait, every request in that window (the
// old instance's routes stop first) failed with ErrSupervisorFailed.
func (l *Call) incarnation() (*Incarnation, gaveUp) {
	for {
		inc := l.p.inc.Load()
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
