package actors

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Making room: when a route waits for a permit and MaxConnsTotal or
// MaxConnsPerHost is reached, the supervisor has the least recently used idle
// connection closed (EvictIdleRequest), or, with none idle, asks the routes
// holding connections to close the next one they free (RoomWanted). A route
// above its fleet share is asked the same way (supervisor_fleet.go).

// makeRoom frees a place for the oldest waiter: any place when the total is
// reached (host ""), a place of host otherwise. An eviction in flight (for
// room or for a fleet share) frees a place already: its answer runs
// grantPermits again.
func (s *Supervisor) makeRoom(ctx actor.Context, host string) {
	if s.evicting > 0 {
		return
	}
	if e := s.lruIdleRoute(host); e != nil {
		s.askEvict(ctx, e)
		return
	}
	s.wantRoom(ctx, true, host)
}

// askEvict sends e an EvictIdleRequest; at most one is unanswered per route.
func (s *Supervisor) askEvict(ctx actor.Context, e *routeEntry) {
	e.evicting = true
	s.evicting++
	ctx.Send(e.h.PID, &EvictIdleRequest{})
}

// onIdleEvicted: the route answered an EvictIdleRequest (its ConnClosed,
// if it closed one, came first).
func (s *Supervisor) onIdleEvicted(ctx actor.Context, m *IdleEvicted) {
	e := s.byID[m.From.Id]
	if e == nil {
		return // stopped meanwhile: onTerminated counted its eviction out
	}
	if e.evicting {
		e.evicting = false
		s.evicting--
	}
	s.report(ctx, e)
	s.enforceShare(ctx, e)
}

// wantRoom tells routes that room is wanted (of host, or of any host when it
// is ""), or no longer: the routes holding connections that can free the
// place are told, the others told it is no longer wanted; one message per
// route per change. It costs a pass over the routes only while room is
// wanted or was.
func (s *Supervisor) wantRoom(ctx actor.Context, want bool, host string) {
	if !want && s.roomN == 0 {
		return
	}
	for _, e := range s.list {
		w := want && e.held > 0 && (host == "" || e.host == host)
		if w == e.roomTotal {
			continue
		}
		e.roomTotal = w
		if w {
			s.roomN++
		} else {
			s.roomN--
		}
		s.tellRoom(ctx, e)
	}
}

// tellRoom sends e a RoomWanted when what it should know changed: room is
// wanted of it for the total or the host cap, or it holds more than its fleet
// share (then the connections it frees close rather than idle).
func (s *Supervisor) tellRoom(ctx actor.Context, e *routeEntry) {
	over := s.overShare(e)
	w := e.roomTotal || over
	if w == e.room && over == e.shed {
		return
	}
	e.room, e.shed = w, over
	ctx.Send(e.h.PID, &RoomWanted{Wanted: w, Shed: over})
}

// lruIdleRoute finds the route (of host, or of any host when it is "") whose
// oldest idle connection is the least recently used of all, from the routes'
// published LRUIdleSince. It costs one atomic load per route that holds a
// connection (at most MaxConnsTotal of them, however many routes there are),
// and runs only when a limit is reached.
func (s *Supervisor) lruIdleRoute(host string) *routeEntry {
	var best *routeEntry
	var bestSince int64
	for _, h := range s.holding {
		since := h.lru.Load()
		if since != 0 && (best == nil || since < bestSince) && (host == "" || h.e.host == host) {
			best, bestSince = h.e, since
		}
	}
	return best
}

// holder is an entry of Supervisor.holding: the route's published
// LRUIdleSince beside its entry, so that lruIdleRoute's pass reads one
// pointer per route rather than three in a row.
type holder struct {
	lru *atomic.Int64
	e   *routeEntry
}

// holdChanged keeps e in holding while it holds a permit, after its held
// changed: a slice with each entry's place in it (routeEntry.holdIdx), so
// that an entry joins and leaves in constant time.
func (s *Supervisor) holdChanged(e *routeEntry) {
	switch {
	case e.held > 0 && e.holdIdx < 0:
		e.holdIdx = len(s.holding)
		s.holding = append(s.holding, holder{lru: &e.h.Pub.LRUIdleSince, e: e})
	case e.held == 0 && e.holdIdx >= 0:
		last := s.holding[len(s.holding)-1]
		s.holding[e.holdIdx], last.e.holdIdx = last, e.holdIdx
		s.holding[len(s.holding)-1] = holder{}
		s.holding = s.holding[:len(s.holding)-1]
		e.holdIdx = -1
	}
}
