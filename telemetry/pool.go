package telemetry

import (
	"context"
	"iter"
	"log/slog"
	"net/netip"
	"time"

	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/connactor/connactor/route"
)

// The hooks below are called by route actors inside Receive: they only add to
// instruments and write debug logs, and never block.

// ConnOpened records a connection of route name (for logs) to peer (its
// network.peer.address and port; zero when unknown) whose dial succeeded
// after took.
func (r *Route) ConnOpened(name string, id uint64, peer netip.AddrPort, took time.Duration) {
	if r == nil {
		return
	}
	p := r.peer(peer)
	r.t.opened.Add(background, 1, p.opt)
	r.t.dialDuration.Record(background, took.Seconds(), p.opt)
	if r.t.log.Enabled(background, slog.LevelDebug) {
		r.t.log.LogAttrs(background, slog.LevelDebug, "connactor: connection opened",
			slog.String("route", name), slog.Uint64("conn", id), slog.Any("peer", peer), slog.Duration("dial", took))
	}
}

// DialFailed records a dial of route name to peer (zero when it went by
// name) that failed after took: the dial errors counter by error.type (see
// ErrorType) and peer, and a Debug log. Each failed dial is logged at Debug
// only: the library is quiet by default, and a route that keeps failing is
// its actor's to report, once per change of state.
func (r *Route) DialFailed(name string, peer netip.AddrPort, err error, took time.Duration) {
	if r == nil {
		return
	}
	r.t.dialErrors.Add(background, 1, r.dialErrOpt(peer, ErrorType(err)))
	if r.t.log.Enabled(background, slog.LevelDebug) {
		r.t.log.LogAttrs(background, slog.LevelDebug, "connactor: dial failed",
			slog.String("route", name), slog.Duration("took", took), slog.Any("err", err))
	}
}

// ConnClosed records the close of an open connection of route name to peer
// (zero when unknown): reason is one of actors' CloseReason values, age the
// time since the connection was started, served the number of requests it
// carried.
func (r *Route) ConnClosed(name string, id uint64, peer netip.AddrPort, reason string, age time.Duration, served int) {
	if r == nil {
		return
	}
	r.t.closed.Add(background, 1, r.closeOpt(peer, reason))
	r.t.connDuration.RecordSet(background, age.Seconds(), r.peer(peer).set)
	level := slog.LevelDebug
	if reason == "error" {
		level = slog.LevelWarn
	}
	if r.t.log.Enabled(background, level) {
		r.t.log.LogAttrs(background, level, "connactor: connection closed",
			slog.String("route", name), slog.Uint64("conn", id), slog.String("reason", reason),
			slog.Duration("age", age), slog.Int("served", served))
	}
}

// LeaseGranted records how long a lease waited (0 when a connection was idle).
func (r *Route) LeaseGranted(waited time.Duration) {
	if r == nil {
		return
	}
	if r.t.leaseWait.Enabled(background) { // saves the options slice when nobody listens
		r.t.leaseWait.Record(background, waited.Seconds(), r.opt)
	}
}

// RouteReading is one route's counters as its actor published them: of
// Stats, the gauges read Leased (active connections), Idle, Pending, FailFast
// (open or not), LearnedIdle and FleetShare.
type RouteReading struct {
	Route *Route
	// Fleet says the route has a fleet-wide budget (connactor.fleet.share is
	// observed only for routes with Fleet set).
	Fleet bool
	Stats route.Stats
}

// LeaseRejected counts a request a route refused by policy: reason is
// "queue_full" or "route_unavailable".
func (r *Route) LeaseRejected(reason string) {
	if r == nil {
		return
	}
	r.t.rejected.Add(background, 1, r.optWith(&r.byReject, netip.AddrPort{}, AttrRejectReason.String(reason)))
}

// RequestShed counts a caller the route refused with ErrOverloaded (its
// queue stood above QueueTarget): connactor.route.shed by error.type, and
// connactor.lease.rejected by reason "overloaded".
func (r *Route) RequestShed() {
	if r == nil {
		return
	}
	r.t.shed.Add(background, 1, r.optWith(&r.byShed, netip.AddrPort{}, semconv.ErrorTypeKey.String(ErrorTypeOverloaded)))
	r.LeaseRejected(ErrorTypeOverloaded)
}

// RegisterPool registers the callback of the pool gauges
// (http.client.open_connections by http.connection.state, connactor.lease.pending,
// connactor.admission.pending, connactor.route.fail_fast,
// connactor.route.learned_idle, connactor.endpoint.open_connections by
// address for routes with endpoints and, for routes with a fleet budget,
// connactor.fleet.share). routes yields every live route's published
// counters and admission returns the number of requests queued for admission;
// both run on the meter's collection goroutine and must read atomics only,
// never message or lock an actor. Routes to the same destination (other
// identities or proxies) are summed. Close unregisters the callback.
func (t *Telemetry) RegisterPool(routes iter.Seq[RouteReading], admission func() int64) error {
	if t == nil {
		return nil
	}
	type sums struct {
		active, idle, pending int64
		failFast              bool
		learnedIdle           time.Duration
		fleet                 bool
		fleetShare            int64
		limit                 int64
		endpoints             map[netip.AddrPort]int64 // open connections by address
		addrs                 []netip.AddrPort         // endpoints' order of first reading
	}
	cb := func(_ context.Context, o metric.Observer) error {
		by := map[*Route]*sums{}
		var order []*Route
		for rr := range routes {
			if rr.Route == nil {
				continue
			}
			s := by[rr.Route]
			if s == nil {
				s = &sums{}
				by[rr.Route] = s
				order = append(order, rr.Route)
			}
			st := &rr.Stats
			s.active += int64(st.Leased)
			s.idle += int64(st.Idle)
			s.pending += int64(st.Pending)
			s.limit += int64(st.Limit)
			s.failFast = s.failFast || st.FailFast == route.FailFastOpen
			s.learnedIdle = max(s.learnedIdle, st.LearnedIdle)
			if rr.Fleet {
				s.fleet = true
				s.fleetShare += int64(st.FleetShare)
			}
			for _, e := range st.Endpoints {
				if s.endpoints == nil {
					s.endpoints = map[netip.AddrPort]int64{}
				}
				if _, ok := s.endpoints[e.Addr]; !ok {
					s.addrs = append(s.addrs, e.Addr)
				}
				s.endpoints[e.Addr] += int64(e.Open)
			}
		}
		for _, r := range order {
			s := by[r]
			o.ObserveInt64(t.openConns.Inst(), s.active, metric.WithAttributeSet(r.active))
			o.ObserveInt64(t.openConns.Inst(), s.idle, metric.WithAttributeSet(r.idle))
			o.ObserveInt64(t.leasePending, s.pending, r.opt)
			ff := int64(0)
			if s.failFast {
				ff = 1
			}
			o.ObserveInt64(t.failFast, ff, r.opt)
			if s.limit > 0 {
				o.ObserveInt64(t.routeLimit, s.limit, r.opt)
			}
			o.ObserveFloat64(t.learnedIdle, s.learnedIdle.Seconds(), r.opt)
			if s.fleet {
				o.ObserveInt64(t.fleetShare, s.fleetShare, r.opt)
			}
			for _, a := range s.addrs {
				o.ObserveInt64(t.endpointOpen, s.endpoints[a], r.peer(a).opt)
			}
		}
		o.ObserveInt64(t.admitPending, admission())
		return nil
	}
	reg, err := t.meter.RegisterCallback(cb, t.openConns.Inst(), t.leasePending, t.admitPending, t.failFast, t.learnedIdle, t.fleetShare,
		t.endpointOpen, t.routeLimit)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reg != nil {
		t.reg.Unregister()
	}
	t.reg = reg
	return nil
}
