package actors

import (
	"errors"
	"fmt"
	"time"

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
			p.forgetRoute(h) // its actor stopped: ask for a new one
		default:
			return h, nil
		}
	}
	// The supervisor's mailbox survives its restarts: a request posted while
	// it restarts is answered by the restarted instance, and one posted after
	// it stopped by the mailbox itself (ErrClosing).
	t := &wait.Ticket[*routeHandle]{}
	postFrom(p, l.foreign, p.supMB, &RouteRequest{Key: key, Ticket: t})
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
	select {
	case <-h.Done: // stopped meanwhile: its RouteStopped may have come before the Store
		p.forgetRoute(h)
	default:
	}
	return h, nil
}

// forgetRoute drops h from the route cache once its actor has stopped
// (SupervisorConfig.RouteStopped), unless the cache holds a newer route.
func (p *Pool) forgetRoute(h *routeHandle) { p.routes.CompareAndDelete(h.Key, h) }

// leaseOnRoute leases a connection of the call's route: an offer from its
// outbox (unless fresh or avoid rule a re-used connection out), or the
// answer to a LeaseRequest. It returns the attempt's Exchange (with its
// route), the lease, why the wait ended and the route's error; a nil
// Exchange when no route was had (err says why). A route that reclaimed
// itself unused refuses the leases it did not serve, and so does its mailbox
// once it has stopped (ErrRouteClosed): the lease is then asked again of the
// route the supervisor has for the key now (see route_reclaim.go), which is
// where the race between a caller holding the handle and the route's
// reclamation ends, without an error.
func (l *Call) leaseOnRoute(fresh bool, avoid uint64) (*Exchange, Lease, gaveUp, error) {
	p := l.p
	for {
		h, err := l.routeFor()
		if err != nil {
			return nil, Lease{}, served, err
		}
		x := &Exchange{p: p, tel: l.tel, trace: l.trace, gzip: l.gzip, route: h, foreign: l.foreign}
		// A caller in a bubble leases by message: it would judge an offer's
		// due time by its bubble's clock, and decline one from its own
		// goroutine, where the route's work must not run.
		if !fresh && avoid == 0 && !l.foreign {
			if lease, ok := h.take(l.now()); ok {
				x.ticket.Deliver(lease) // the lease's one record, as a granted one's (GiveBack)
				return x, lease, served, nil
			}
		}
		x.leaseReq = LeaseRequest{Ticket: &x.ticket, Fresh: fresh, Trace: x.trace, Avoid: avoid}
		x.post(&x.leaseReq)
		lease, err, why := await(l, &x.ticket)
		if why == served && errors.Is(err, ErrRouteClosed) && h.Pub.Reclaimed.Load() && !p.closing.Load() {
			p.forgetRoute(h)
			continue
		}
		return x, lease, why, err
	}
}

// take receives an offer from the route's outbox, if one is there, without
// blocking: on an empty outbox it is a load, and takes no lock. now is when
// the caller's request started (or later). It reports false, with nothing
// taken, when the outbox is empty, or when the offer it took was past its
// due time: it declines that one (OfferDeclined), and the caller leases
// another way.
func (h *routeHandle) take(now time.Time) (Lease, bool) {
	var o offer
	select {
	case o = <-h.outbox:
	default:
		return Lease{}, false
	}
	if !o.until.IsZero() && !now.Before(o.until) {
		h.post(&OfferDeclined{ConnID: o.conn.id, At: now})
		return Lease{}, false
	}
	// now is the call's start, which may predate the offer.
	return o.conn.lease(Lease{Reused: true, IdleTime: max(0, now.Sub(o.idleSince)), Offered: true}), true
}
