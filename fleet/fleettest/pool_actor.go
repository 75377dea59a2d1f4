package fleettest

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/fleet"
)

// poolActor is the Pool's actor; its fields are touched only in Receive.
type poolActor struct {
	p       *Pool
	keeper  *actor.PID
	share   int
	budget  int
	open    int // connections open plus dials in flight: what the budget limits
	dialing int
	idle    []*poolConn
	all     map[*poolConn]struct{}
	waiters []chan *poolConn

	stopping, crashed, drained bool
	reported                   fleet.UsageReported
}

func (a *poolActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *acquireRequest:
		a.onAcquire(m)
	case *acquireCancelled:
		a.onCancelled(m)
	case *connReleased:
		a.onReleased(m)
	case *dialEnded:
		a.onDialEnded(m)
	case *fleet.ShareChanged:
		a.onShareChanged(m)
	case *keeperSet:
		a.keeper = m.pid
	case *drainRequest:
		a.onDrain(m)
	case *actor.Started:
		a.all = map[*poolConn]struct{}{}
		return
	case *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return
	default:
		a.p.cfg.Logger.Warn("fleettest: pool got an unknown message", slog.String("type", fmt.Sprintf("%T", m)))
		return
	}
	a.fill()
	a.publish()
	a.report(ctx)
	if a.stopping && a.open == 0 && !a.drained {
		a.drained = true
		close(a.p.drained)
	}
}

func (a *poolActor) onAcquire(m *acquireRequest) {
	switch {
	case a.stopping:
		m.reply <- nil
	case len(a.idle) > 0:
		c := a.idle[len(a.idle)-1]
		a.idle = a.idle[:len(a.idle)-1]
		m.reply <- c
	default:
		a.waiters = append(a.waiters, m.reply)
	}
}

func (a *poolActor) onCancelled(m *acquireCancelled) {
	if i := slices.Index(a.waiters, m.reply); i >= 0 {
		a.waiters = slices.Delete(a.waiters, i, i+1)
		m.reply <- nil
	}
}

func (a *poolActor) onReleased(m *connReleased) {
	if _, ok := a.all[m.c]; !ok {
		return // closed by a crash while its request ran
	}
	if m.broken || a.stopping || a.open > a.share {
		a.close(m.c)
		return
	}
	a.give(m.c)
}

func (a *poolActor) onDialEnded(m *dialEnded) {
	a.dialing--
	if m.err != nil {
		a.open--
		if len(a.waiters) > 0 { // the caller it was for tries again later
			a.waiters[0] <- nil
			a.waiters = a.waiters[1:]
		}
		return
	}
	a.all[m.c] = struct{}{}
	if a.stopping || a.open > a.share {
		a.close(m.c)
		return
	}
	a.give(m.c)
}

// give hands c to the first waiter, or keeps it idle.
func (a *poolActor) give(c *poolConn) {
	if len(a.waiters) > 0 {
		a.waiters[0] <- c
		a.waiters = a.waiters[1:]
		return
	}
	a.idle = append(a.idle, c)
}

func (a *poolActor) close(c *poolConn) {
	_ = c.Close()
	delete(a.all, c)
	a.open--
}

// onShareChanged enforces a new share: above it, idle connections close at
// once and busy ones when their request ends; none opens until under it.
func (a *poolActor) onShareChanged(m *fleet.ShareChanged) {
	a.share, a.budget = m.Share, m.Budget
	for a.open > a.share && len(a.idle) > 0 {
		c := a.idle[0]
		a.idle = a.idle[1:]
		a.close(c)
	}
}

func (a *poolActor) onDrain(m *drainRequest) {
	a.stopping = true
	a.crashed = a.crashed || m.crash
	for _, c := range a.idle {
		a.close(c)
	}
	a.idle = nil
	if m.crash {
		for c := range a.all {
			a.close(c) // the caller's request fails; its release is ignored
		}
	}
	for _, w := range a.waiters {
		w <- nil
	}
	a.waiters = nil
}

// fill starts dials for waiters not yet covered by one, within the share.
func (a *poolActor) fill() {
	for !a.stopping && a.open < a.share && a.dialing < len(a.waiters) {
		a.open++
		a.dialing++
		a.p.dials.Go(a.p.dial)
	}
}

func (a *poolActor) publish() {
	changed := a.p.share.Load() != int64(a.share) || a.p.held.Load() != int64(a.open)
	defer func() {
		if changed && a.p.cfg.Changed != nil {
			select {
			case a.p.cfg.Changed <- struct{}{}:
			default:
			}
		}
	}()
	a.p.share.Store(int64(a.share))
	a.p.budget.Store(int64(a.budget))
	a.p.held.Store(int64(a.open))
	a.p.idle.Store(int64(len(a.idle)))
	a.p.waiting.Store(int64(len(a.waiters)))
}

// report tells the keeper the usage when it changed.
func (a *poolActor) report(ctx actor.Context) {
	if a.keeper == nil || a.crashed {
		return
	}
	u := fleet.UsageReported{Route: a.p.cfg.Route, Held: a.open, Idle: len(a.idle), Waiting: max(0, len(a.waiters)-a.dialing)}
	if u == a.reported {
		return
	}
	a.reported = u
	ctx.Send(a.keeper, &u)
}
