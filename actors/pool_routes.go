package actors

import (
	"errors"
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
	// The supervisor's mailbox survives its restarts: a request posted while
	// it restarts is answered by the restarted instance, and one posted after
	// it stopped by the mailbox itself (ErrClosing).
	t := &wait.Ticket[*routeHandle]{}
	p.supMB.PostUserMessage(&RouteRequest{Key: key, Ticket: t})
	h, err, why := await(l, t)
	switch {
	case why != served:
		return nil, l.waitErr(why, "its route")
	case errors.Is(err, ErrSupervisorFailed):
		// Not asked again of the restarted supervisor: the request may be
		// what made the supervisor fail, and asking again would fail it again.
		return nil, NotSent(fmt.Errorf("connactor: %w while starting the route of %s", ErrSupervisorFailed, l.target()))
	case err != nil:
		return nil, ErrClosed // the supervisor is closing
	}
	p.routes.Store(key, h)
	return h, nil
}
