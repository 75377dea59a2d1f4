package telemetry

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"
)

// http.client.active_requests is observed, not added to. The SDK's
// synchronous UpDownCounter cost each request two Adds, each of which
// allocates its options, normalises the attribute set, looks its point up in
// a map and adds to it; a Route's own counter costs two atomic adds, and the
// meter reads the counters when it collects (BenchmarkRequestTelemetryParallel
// with the meter SDK alone: about 1.5 us and 4 allocations a request before,
// 0.7 to 0.8 us and 2 after). The counter is per Route, not striped: its
// writes are shared by the requests to one destination only, which share its
// route actor too, and stripes on cache lines of their own would cost a
// kilobyte or more per destination to a client that calls many.
//
// What exporters see is the same cumulative, non-monotonic sum by
// server.address, server.port and url.scheme, with the semantic conventions'
// name, unit and description, exact at each collection. Two things differ: a
// destination with nothing in flight and no request for activeGrace is no
// longer reported (the synchronous counter reported its 0 for as long as the
// process lived), and the points carry no exemplars (an observation has no
// request's span to link).

// inFlight is a Route's count of requests in flight, for
// http.client.active_requests, alone on its cache line: every request to the
// destination writes it twice, and the Route's other fields are read by those
// requests.
type inFlight struct {
	_ [64]byte
	n atomic.Int64 // requests started and not yet ended
	// listed says the Route is in its Telemetry's activeList (the collection
	// reads it); only a CompareAndSwap from false to true puts it there, and
	// only the collection takes it out.
	listed atomic.Bool
	// used says a request started since the last collection.
	used atomic.Bool
	_    [64]byte
	// zeroSince is when a collection first found the count at 0 with no
	// request started since the one before (0: it did not); guarded by
	// activeList.collect.
	zeroSince int64
}

// activeGrace is how long a destination with no request in flight and none
// started is still observed, at 0, before it is dropped: longer than any
// reader's collection interval (the SDK's periodic reader's default is 60 s,
// Prometheus scrapes every 15 s to 2 min), so that every reader reads the 0
// before the point goes, as the synchronous counter it replaces reported it.
const activeGrace = 5 * time.Minute

// activeList holds the Routes whose requests http.client.active_requests
// observes: every Route with a request in flight or one started within
// activeGrace. Any other is dropped when the meter collects, so a client that
// calls 100,000 hosts once each keeps them no longer than that; a request to a
// dropped Route lists it again. When nothing collects (a meter provider
// without readers, a view that drops the instrument, a reader shut down), the
// list is pruned as it grows instead (listActive).
type activeList struct {
	mu      sync.Mutex // guards routes and pruneAt; held to append, and by the collection to swap routes
	routes  []*Route
	pruneAt int // the length at which listActive prunes, when nothing collected lately
	// collect runs one collection at a time: every reader of the meter
	// provider calls the callback, possibly at once.
	collect     sync.Mutex
	lastCollect atomic.Int64     // when the last collection ran (unix ns; 0: never)
	now         func() time.Time // time.Now; read once per collection and per prune check
}

// activeMinPrune is the least length at which the list is pruned.
const activeMinPrune = 1024

// newActive creates http.client.active_requests as an observable instrument
// with the semantic conventions' name, unit and description, and says whether
// requests are to be counted at all: not when the meter is a no-op or refused
// the instrument.
func (t *Telemetry) newActive(m metric.Meter, mp metric.MeterProvider) error {
	t.activeList.now = time.Now
	var conv httpconv.ClientActiveRequests // only for its name, unit and description
	inst, err := m.Int64ObservableUpDownCounter(conv.Name(), metric.WithUnit(conv.Unit()),
		metric.WithDescription(conv.Description()))
	if err != nil || inst == nil || isNoopMeter(mp) {
		t.activeObs, _ = metricnoop.Meter{}.Int64ObservableUpDownCounter("")
		return err
	}
	t.activeObs, t.activeOn = inst, true
	if isUnsetGlobalMeter(mp) {
		t.unsetMeter = mp
	}
	t.activeReg, err = m.RegisterCallback(t.observeActive, t.activeObs)
	if err != nil {
		t.activeOn = false
	}
	return err
}

// activeEnabled reports whether a request starting now is counted in
// http.client.active_requests. With otel's global meter provider, requests
// are counted from when a provider is installed (an atomic load per request
// to see it) and, as long as none is, not at all: nothing reads them.
func (t *Telemetry) activeEnabled() bool {
	if !t.activeOn {
		return false
	}
	if t.unsetMeter == nil {
		return true
	}
	mp := otel.GetMeterProvider()
	return mp != t.unsetMeter && !isNoopMeter(mp)
}

// startActive counts a request to r in flight. It lists r when it is not
// listed: the collection unlists a Route before it reads its count for the
// last time, so either that read sees this request or this check sees the
// Route unlisted (sync/atomic's operations are sequentially consistent).
func (r *Route) startActive() {
	c := &r.inFlight
	c.n.Add(1)
	if !c.used.Load() {
		c.used.Store(true)
	}
	if !c.listed.Load() {
		r.t.listActive(r)
	}
}

// endActive counts the end of a request startActive counted.
func (r *Route) endActive() { r.inFlight.n.Add(-1) }

// listActive lists r, unless a collection that unlisted it listed it again
// meanwhile. A list that reached pruneAt with no collection for activeGrace
// drops its Routes with nothing in flight, and prunes next at twice the
// length it kept: a Route is listed at most once per collection, so the list
// outgrows what collections drop only when nothing collects.
func (t *Telemetry) listActive(r *Route) {
	a := &t.activeList
	a.mu.Lock()
	defer a.mu.Unlock()
	if !r.inFlight.listed.CompareAndSwap(false, true) {
		return
	}
	a.routes = append(a.routes, r)
	if len(a.routes) < max(a.pruneAt, activeMinPrune) || a.now().UnixNano()-a.lastCollect.Load() < int64(activeGrace) {
		return
	}
	keep := a.routes[:0]
	for _, r := range a.routes {
		if c := &r.inFlight; !c.unlistIfIdle() {
			keep = append(keep, r)
		} else {
			r.forgetUntaken() // refused before any route actor took it (Request.Failed)
		}
	}
	clear(a.routes[len(keep):])
	a.routes = keep
	a.pruneAt = 2 * len(keep)
}

// unlistIfIdle unlists the Route when it has nothing in flight, and reports
// whether it did. Only the holder of the Route's place in a list may call it
// (the collection for the list it swapped out, listActive for the current
// one). A request that starts meanwhile either is seen by the second load or
// sees the Route unlisted and lists it again (into the current list; then
// the CompareAndSwap here fails, and the Route is unlisted from this one).
func (c *inFlight) unlistIfIdle() bool {
	c.listed.Store(false)
	return c.n.Load() == 0 || !c.listed.CompareAndSwap(false, true)
}

// activePoint is one destination's observation: the Routes made for it again
// after it was forgotten (see Route.Forget) add up. A Route dropped in this
// collection is observed too (at 0, or at what a request that listed it again
// meanwhile added).
type activePoint struct {
	n   int64
	opt metric.ObserveOption
}

// observeActive is http.client.active_requests' callback, run by the meter's
// readers on their goroutines. It reads the listed Routes' counters and drops
// each Route that has had nothing in flight and no request started for
// activeGrace. Requests that list a Route meanwhile append to a new list,
// which the next collection reads.
func (t *Telemetry) observeActive(_ context.Context, o metric.Observer) error {
	a := &t.activeList
	a.collect.Lock()
	defer a.collect.Unlock()
	a.mu.Lock()
	list := a.routes
	a.routes = nil
	a.mu.Unlock()

	now := a.now().UnixNano()
	a.lastCollect.Store(now)
	keep := list[:0]
	points := make(map[routeID]*activePoint, len(list))
	var order []routeID
	for _, r := range list {
		c := &r.inFlight
		used := c.used.Swap(false)
		n := c.n.Load()
		switch {
		case n != 0 || used:
			c.zeroSince = 0
			keep = append(keep, r)
		case c.zeroSince == 0:
			c.zeroSince = now
			keep = append(keep, r)
		case now-c.zeroSince < int64(activeGrace):
			keep = append(keep, r)
		case c.unlistIfIdle():
			n = c.n.Load()    // 0, or a request that listed it again: observed here and next time
			r.forgetUntaken() // refused before any route actor took it (Request.Failed)
		default:
			c.zeroSince = 0
			keep = append(keep, r)
		}
		p := points[r.id]
		if p == nil {
			p = &activePoint{opt: r.opt}
			points[r.id] = p
			order = append(order, r.id)
		}
		p.n += n
	}
	clear(list[len(keep):]) // no dropped Route stays reachable from the array
	for _, id := range order {
		p := points[id]
		o.ObserveInt64(t.activeObs, p.n, p.opt)
	}
	a.mu.Lock()
	a.routes = append(keep, a.routes...)
	a.mu.Unlock()
	return nil
}

// isNoopMeter reports whether mp is the metric API's no-op provider.
func isNoopMeter(mp metric.MeterProvider) bool {
	switch mp.(type) {
	case metricnoop.MeterProvider, *metricnoop.MeterProvider:
		return true
	}
	return false
}

// isUnsetGlobalMeter reports whether mp is otel's placeholder global meter
// provider, the one otel.GetMeterProvider returns until
// otel.SetMeterProvider is called.
func isUnsetGlobalMeter(mp metric.MeterProvider) bool {
	return reflect.TypeOf(mp).String() == "*global.meterProvider"
}
