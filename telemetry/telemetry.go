// Package telemetry is the only package of connactor that creates OpenTelemetry
// instruments and spans. The client front door starts one Request per HTTP
// request (a client span following the HTTP semantic conventions, the request
// metrics); route actors call the hooks of their Route (connections opened and
// closed with their reason, lease waits); the pool gauges read counters the
// actors publish, never the actors themselves.
//
// Everything here is safe for concurrent use, never blocks, and costs next to
// nothing when the providers are no-ops: a nil *Telemetry, *Route or *Request
// is valid and does nothing, and the front door gets a nil *Request when neither
// tracing nor request metrics are enabled.
package telemetry

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of connactor's tracer and meter.
const ScopeName = modulePath

// Names of connactor's own instruments (the HTTP ones use the semantic
// conventions' names: http.client.request.duration, http.client.active_requests,
// http.client.open_connections, http.client.connection.duration).
const (
	MetricLeaseWait      = "connactor.lease.wait.duration"       // histogram, s: time from lease request to grant
	MetricLeasePending   = "connactor.lease.pending"             // gauge: requests queued for a connection, per route
	MetricLeaseTimeouts  = "connactor.lease.timeouts"            // counter: requests that gave up after LeaseTimeout
	MetricAdmitPending   = "connactor.admission.pending"         // gauge: requests queued under MaxConcurrentRequests
	MetricConnOpened     = "connactor.connection.opened"         // counter: connections dialed successfully
	MetricConnClosed     = "connactor.connection.closed"         // counter by connactor.connection.close_reason
	MetricDialErrors     = "connactor.connection.dial_errors"    // counter by error.type: dials that failed
	MetricDialDuration   = "connactor.connection.dial.duration"  // histogram, s: TCP connect plus tunnel and TLS
	MetricRequestRetries = "connactor.request.retries"           // counter: replays on a fresh connection
	MetricRetriesRefused = "connactor.request.retries_refused"   // counter: replays the retry budget refused
	MetricLeaseRejected  = "connactor.lease.rejected"            // counter by connactor.lease.reject_reason (queue_full, route_unavailable)
	MetricRouteFailFast  = "connactor.route.fail_fast"           // gauge: 1 while a route fails fast (its dials keep failing)
	MetricRouteIdleLearn = "connactor.route.learned_idle"        // gauge, s: the server's idle timeout a route learned (0 = none)
	MetricFleetShare     = "connactor.fleet.share"               // gauge: this node's share of a route's fleet-wide budget (Config.Fleet)
	MetricEndpointOpen   = "connactor.endpoint.open_connections" // gauge by network.peer.address and port: connections open or dialing to each address of a route's host
	MetricFleetRenewal   = "connactor.fleet.renewal.duration"    // histogram, s: one renewal with a budget host (ask, renew or give back), by error.type when it failed

	// Hedged requests (Config.Hedge).
	MetricHedges    = "connactor.request.hedges"     // counter: hedged attempts sent
	MetricHedgeWins = "connactor.request.hedge_wins" // counter: requests whose response came from a hedged attempt

	// Overload control (Config.Adaptive, Config.QueueTarget).
	MetricRouteLimit = "connactor.route.limit" // gauge: a route's limit on its requests in flight (leases plus HTTP/2 streams)
	MetricRouteShed  = "connactor.route.shed"  // counter by error.type (overloaded): callers a route shed from its standing queue
)

// Attribute keys and span event names of connactor's own.
const (
	AttrCloseReason  = attribute.Key("connactor.connection.close_reason")
	AttrRejectReason = attribute.Key("connactor.lease.reject_reason")
	AttrWait         = attribute.Key("connactor.lease.wait.duration")  // seconds
	AttrQueuePos     = attribute.Key("connactor.lease.queue_position") // 1 = first in line
	AttrIdleTime     = attribute.Key("connactor.connection.idle_time") // seconds
	AttrDial         = attribute.Key("connactor.dial.duration")        // seconds
	AttrConnect      = attribute.Key("connactor.dial.connect.duration")
	AttrTLS          = attribute.Key("connactor.tls.duration")

	EventPoolWait     = "connactor.pool.wait"
	EventDial         = "connactor.dial"
	EventTLS          = "connactor.tls_handshake"
	EventReused       = "connactor.connection.reused"
	EventRetry        = "connactor.retry"
	EventRetryRefused = "connactor.retry_refused" // the retry budget refused a replay

	// AttrHedge is set on the span of each attempt of a hedged request:
	// true for a hedged attempt, false for the request's first;
	// AttrAttempt numbers them from 0.
	AttrHedge   = attribute.Key("connactor.hedge")
	AttrAttempt = attribute.Key("connactor.attempt")
)

// Config says where telemetry goes. Zero fields mean the OpenTelemetry globals.
type Config struct {
	TracerProvider trace.TracerProvider          // nil = otel.GetTracerProvider()
	MeterProvider  metric.MeterProvider          // nil = otel.GetMeterProvider()
	Propagator     propagation.TextMapPropagator // nil = otel.GetTextMapPropagator()
	Logger         *slog.Logger                  // nil = slog.Default()

	version string // the instrumentation scope's version: Version() unless a test sets it
}

// Telemetry holds a client's tracer, instruments and logger. Make one with New;
// the nil *Telemetry records nothing.
type Telemetry struct {
	log     *slog.Logger
	version string       // the instrumentation scope's version
	tracer  trace.Tracer // Config.TracerProvider's; nil when it is a known no-op or not set
	// Without Config.TracerProvider, the tracer follows otel's global provider,
	// looked up per request (an atomic load), so a provider installed after New
	// is used. While nothing installed one (unsetGlobal still is the global),
	// no span is started: otel's placeholder would allocate a non-recording
	// span per request for nothing. The caller's trace context still propagates.
	global      bool
	unsetGlobal trace.TracerProvider
	globalCache atomic.Pointer[tracerFor]
	prop        propagation.TextMapPropagator
	meter       metric.Meter

	reqDuration  httpconv.ClientRequestDuration
	activeObs    metric.Int64ObservableUpDownCounter // http.client.active_requests (active.go)
	activeOn     bool                                // requests are counted in it (newActive)
	unsetMeter   metric.MeterProvider                // otel's placeholder global provider, when it was the one at New
	activeList   activeList                          // the Routes it observes
	connDuration httpconv.ClientConnectionDuration
	openConns    httpconv.ClientOpenConnectionsObservable
	leaseWait    metric.Float64Histogram
	dialDuration metric.Float64Histogram
	leasePending metric.Int64ObservableUpDownCounter
	admitPending metric.Int64ObservableUpDownCounter
	leaseTimeout metric.Int64Counter
	opened       metric.Int64Counter
	closed       metric.Int64Counter
	dialErrors   metric.Int64Counter
	retries      metric.Int64Counter
	retryRefused metric.Int64Counter
	hedges       metric.Int64Counter
	hedgeWins    metric.Int64Counter
	rejected     metric.Int64Counter
	failFast     metric.Int64ObservableGauge
	learnedIdle  metric.Float64ObservableGauge
	fleetShare   metric.Int64ObservableGauge
	endpointOpen metric.Int64ObservableUpDownCounter
	fleetRenewal metric.Float64Histogram
	fleetFailed  sync.Map // error.type -> metric.MeasurementOption
	routeLimit   metric.Int64ObservableGauge
	shed         metric.Int64Counter

	routes sync.Map // routeID -> *Route

	mu        sync.Mutex
	reg       metric.Registration // the pool gauges' callback, once registered
	activeReg metric.Registration // http.client.active_requests' callback (newActive)
}

// Bucket boundaries (seconds) of the lease wait histogram: most leases are
// served in microseconds; waits that matter are milliseconds to seconds.
var leaseWaitBuckets = []float64{0, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// New creates the tracer and the instruments. An instrument the meter refuses is
// replaced by a no-op and the error is logged; New itself does not fail.
func New(cfg Config) *Telemetry {
	followGlobal := cfg.TracerProvider == nil
	if followGlobal {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = otel.GetMeterProvider()
	}
	if cfg.Propagator == nil {
		cfg.Propagator = otel.GetTextMapPropagator()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.version == "" {
		cfg.version = Version()
	}
	t := &Telemetry{log: cfg.Logger, prop: cfg.Propagator, version: cfg.version}
	if followGlobal {
		t.global = true
		if isUnsetGlobal(cfg.TracerProvider) {
			t.unsetGlobal = cfg.TracerProvider
		}
	} else {
		t.tracer = t.tracerOf(cfg.TracerProvider)
	}
	m := cfg.MeterProvider.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL),
		metric.WithInstrumentationVersion(t.version))
	t.meter = m
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	t.reqDuration, err = httpconv.NewClientRequestDuration(m)
	check(err)
	check(t.newActive(m, cfg.MeterProvider))
	t.connDuration, err = httpconv.NewClientConnectionDuration(m)
	check(err)
	t.openConns, err = httpconv.NewClientOpenConnectionsObservable(m)
	check(err)
	t.leaseWait, err = m.Float64Histogram(MetricLeaseWait, metric.WithUnit("s"),
		metric.WithDescription("Time a request waited for a pooled connection (0 when one was idle)."),
		metric.WithExplicitBucketBoundaries(leaseWaitBuckets...))
	check(err)
	t.dialDuration, err = m.Float64Histogram(MetricDialDuration, metric.WithUnit("s"),
		metric.WithDescription("Time to open a connection: TCP connect, proxy tunnel and TLS handshake."),
		metric.WithExplicitBucketBoundaries(leaseWaitBuckets...))
	check(err)
	t.endpointOpen, err = m.Int64ObservableUpDownCounter(MetricEndpointOpen, metric.WithUnit("{connection}"),
		metric.WithDescription("Connections open or being dialed to each address a route's host resolves to (network.peer.address), leased and idle together."))
	check(err)
	t.leasePending, err = m.Int64ObservableUpDownCounter(MetricLeasePending, metric.WithUnit("{request}"),
		metric.WithDescription("Requests waiting in a route's queue for a connection."))
	check(err)
	t.admitPending, err = m.Int64ObservableUpDownCounter(MetricAdmitPending, metric.WithUnit("{request}"),
		metric.WithDescription("Requests waiting for admission under MaxConcurrentRequests."))
	check(err)
	t.leaseTimeout, err = m.Int64Counter(MetricLeaseTimeouts, metric.WithUnit("{request}"),
		metric.WithDescription("Requests that found no connection within LeaseTimeout."))
	check(err)
	t.opened, err = m.Int64Counter(MetricConnOpened, metric.WithUnit("{connection}"),
		metric.WithDescription("Connections opened."))
	check(err)
	t.closed, err = m.Int64Counter(MetricConnClosed, metric.WithUnit("{connection}"),
		metric.WithDescription("Connections closed, by reason."))
	check(err)
	t.dialErrors, err = m.Int64Counter(MetricDialErrors, metric.WithUnit("{connection}"),
		metric.WithDescription("Dials that failed."))
	check(err)
	t.retries, err = m.Int64Counter(MetricRequestRetries, metric.WithUnit("{request}"),
		metric.WithDescription("Requests replayed on a fresh connection after a re-used one failed."))
	check(err)
	t.retryRefused, err = m.Int64Counter(MetricRetriesRefused, metric.WithUnit("{request}"),
		metric.WithDescription("Replays refused because retries exceeded the retry budget."))
	check(err)
	t.hedges, err = m.Int64Counter(MetricHedges, metric.WithUnit("{request}"),
		metric.WithDescription("Hedged attempts sent: a further attempt of a request whose response head was late."))
	check(err)
	t.hedgeWins, err = m.Int64Counter(MetricHedgeWins, metric.WithUnit("{request}"),
		metric.WithDescription("Requests whose response came from a hedged attempt."))
	check(err)
	t.rejected, err = m.Int64Counter(MetricLeaseRejected, metric.WithUnit("{request}"),
		metric.WithDescription("Requests refused by a route's policy: full wait queue, or failing fast."))
	check(err)
	t.failFast, err = m.Int64ObservableGauge(MetricRouteFailFast, metric.WithUnit("1"),
		metric.WithDescription("1 while the route fails calls fast because its dials keep failing."))
	check(err)
	t.learnedIdle, err = m.Float64ObservableGauge(MetricRouteIdleLearn, metric.WithUnit("s"),
		metric.WithDescription("The idle timeout of the route's server, as learned from its closes (0 = none)."))
	check(err)
	t.fleetShare, err = m.Int64ObservableGauge(MetricFleetShare, metric.WithUnit("{connection}"),
		metric.WithDescription("This node's share of the route's fleet-wide connection budget."))
	check(err)
	t.fleetRenewal, err = m.Float64Histogram(MetricFleetRenewal, metric.WithUnit("s"),
		metric.WithDescription("Time of one renewal with a budget host (every route of its shards): asking for shares, renewing them or giving them back."),
		metric.WithExplicitBucketBoundaries(leaseWaitBuckets...))
	check(err)
	t.routeLimit, err = m.Int64ObservableGauge(MetricRouteLimit, metric.WithUnit("{request}"),
		metric.WithDescription("The route's limit on its requests in flight: adaptive with Config.Adaptive, else MaxConnsPerRoute (HTTP/2: the streams its connections allow)."))
	check(err)
	t.shed, err = m.Int64Counter(MetricRouteShed, metric.WithUnit("{request}"),
		metric.WithDescription("Callers a route refused with ErrOverloaded: they waited in its queue while it stood longer than Config.QueueTarget."))
	check(err)
	for _, err := range errs {
		t.log.Warn("connactor: telemetry instrument refused", "err", err)
	}
	// A refused instrument is left nil by the meter's contract in some SDKs:
	// fall back to no-ops so that hooks never check.
	noop := metricnoop.Meter{}
	for _, h := range []*metric.Float64Histogram{&t.leaseWait, &t.dialDuration, &t.fleetRenewal} {
		if *h == nil {
			*h, _ = noop.Float64Histogram("")
		}
	}
	for _, g := range []*metric.Int64ObservableUpDownCounter{&t.leasePending, &t.admitPending} {
		if *g == nil {
			*g, _ = noop.Int64ObservableUpDownCounter("")
		}
	}
	for _, g := range []*metric.Int64ObservableGauge{&t.failFast, &t.fleetShare, &t.routeLimit} {
		if *g == nil {
			*g, _ = noop.Int64ObservableGauge("")
		}
	}
	if t.learnedIdle == nil {
		t.learnedIdle, _ = noop.Float64ObservableGauge("")
	}
	for _, c := range []*metric.Int64Counter{&t.leaseTimeout, &t.opened, &t.closed, &t.dialErrors, &t.retries,
		&t.retryRefused, &t.rejected, &t.shed} {
		if *c == nil {
			*c, _ = noop.Int64Counter("")
		}
	}
	return t
}

// Close unregisters the callbacks of the pool gauges and of
// http.client.active_requests (so the meter provider no longer reads a closed
// client). Safe to call more than once, and on nil.
func (t *Telemetry) Close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, reg := range []*metric.Registration{&t.reg, &t.activeReg} {
		if *reg != nil {
			errs = append(errs, (*reg).Unregister())
			*reg = nil
		}
	}
	return errors.Join(errs...)
}

type routeID struct{ scheme, host, port string }

// Route is the telemetry of one destination (scheme, host, port): its attribute
// set is computed once and shared by every route actor and request going there.
// The nil *Route records nothing.
type Route struct {
	t         *Telemetry
	id        routeID // its key in t.routes
	scheme    string
	address   string
	port      int
	attrs     attribute.Set // server.address, server.port, url.scheme
	kv        []attribute.KeyValue
	active    attribute.Set // attrs + http.connection.state=active
	idle      attribute.Set // attrs + http.connection.state=idle
	opt       metric.MeasurementOption
	byClose   sync.Map // peerKey{peer, reason} -> metric.MeasurementOption
	byDialErr sync.Map // peerKey{peer, error.type} -> metric.MeasurementOption
	byReject  sync.Map // peerKey{reject reason} -> metric.MeasurementOption
	byShed    sync.Map // peerKey{error.type} -> metric.MeasurementOption
	durations sync.Map // durationKey -> metric.MeasurementOption
	byPeer    sync.Map // peer address -> *peerAttrs (peer.go)
	inFlight  inFlight // http.client.active_requests (active.go)
	// taken says whether a route actor measures with this Route: a request
	// that failed to one that no route actor took forgets it
	// (Request.Failed), so that requests refused before they reached a
	// route (admission) keep no Route per host they named. Its one
	// CompareAndSwap from routeFree decides between the two, so that a
	// route actor never measures with a Route its requests no longer find.
	taken atomic.Int32
}

// Route.taken's values.
const (
	routeFree      int32 = iota // no route actor took it yet
	routeTaken                  // a route actor measures with it (ActorRoute)
	routeForgotten              // a request forgot it before any route actor took it
)

// Route returns the Route of scheme://host:port (port in decimal), creating it
// on first use. It is cheap after the first call (one map lookup) and safe for
// concurrent use. A nil t returns nil.
func (t *Telemetry) Route(scheme, host, port string) *Route {
	if t == nil {
		return nil
	}
	id := routeID{scheme, host, port}
	if r, ok := t.routes.Load(id); ok {
		return r.(*Route)
	}
	p, _ := strconv.Atoi(port)
	kv := []attribute.KeyValue{
		semconv.ServerAddress(host),
		semconv.ServerPort(p),
		semconv.URLScheme(scheme),
	}
	r := &Route{t: t, id: id, scheme: scheme, address: host, port: p, kv: kv, attrs: attribute.NewSet(kv...)}
	r.active = attribute.NewSet(append(kv[:len(kv):len(kv)], t.openConns.AttrConnectionState(httpconv.ConnectionStateActive))...)
	r.idle = attribute.NewSet(append(kv[:len(kv):len(kv)], t.openConns.AttrConnectionState(httpconv.ConnectionStateIdle))...)
	r.opt = metric.WithAttributeSet(r.attrs)
	v, _ := t.routes.LoadOrStore(id, r)
	return v.(*Route)
}

// ActorRoute is Route for a route actor, which measures its connections and
// leases with it until it Forgets it.
func (t *Telemetry) ActorRoute(scheme, host, port string) *Route {
	for {
		r := t.Route(scheme, host, port)
		if r == nil || r.taken.CompareAndSwap(routeFree, routeTaken) || r.taken.Load() == routeTaken {
			return r
		}
		r.Forget() // a failed request forgot it and may not have dropped it yet
	}
}

// forgetUntaken forgets r unless a route actor took it (ActorRoute). The
// load first leaves the requests failing to a taken Route (a route failing
// fast) a read of its line, not a write.
func (r *Route) forgetUntaken() {
	if r.taken.Load() == routeFree && r.taken.CompareAndSwap(routeFree, routeForgotten) {
		r.Forget()
	}
}

// Forget drops r from its Telemetry's cache, so that a client calling many
// hosts once keeps no Route per host: the route it measured is gone (reclaimed
// unused). Whoever holds r may go on using it, and Route makes a new one on
// the next call for the same route. A nil r does nothing.
func (r *Route) Forget() {
	if r == nil {
		return
	}
	r.t.routes.CompareAndDelete(r.id, r)
}

// closeOpt returns the measurement option of the route's attributes, the
// connection's peer's and the close reason, built once per peer and reason.
func (r *Route) closeOpt(peer netip.AddrPort, reason string) metric.MeasurementOption {
	return r.optWith(&r.byClose, peer, AttrCloseReason.String(reason))
}

// dialErrOpt returns the measurement option of the route's attributes, the
// dialed peer's and error.type, built once per peer and type.
func (r *Route) dialErrOpt(peer netip.AddrPort, errType string) metric.MeasurementOption {
	return r.optWith(&r.byDialErr, peer, semconv.ErrorTypeKey.String(errType))
}

// optWith returns, from cache (keyed by the peer and kv's value), the
// measurement option of the route's attributes, the peer's (none when it is
// zero) and kv.
func (r *Route) optWith(cache *sync.Map, peer netip.AddrPort, kv attribute.KeyValue) metric.MeasurementOption {
	key := peerKey{peer: peer, v: kv.Value.AsString()}
	if v, ok := cache.Load(key); ok {
		return v.(metric.MeasurementOption)
	}
	base := r.peer(peer).kv
	opt := metric.WithAttributeSet(attribute.NewSet(append(base[:len(base):len(base)], kv)...))
	v, _ := cache.LoadOrStore(key, opt)
	return v.(metric.MeasurementOption)
}

var background = context.Background()

type tracerFor struct {
	tp     trace.TracerProvider
	tracer trace.Tracer
}

// tracerOf returns tp's tracer for connactor, or nil when tp is a known no-op.
func (t *Telemetry) tracerOf(tp trace.TracerProvider) trace.Tracer {
	switch tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		return nil // known to record nothing: skip span creation altogether
	}
	return tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL), trace.WithInstrumentationVersion(t.version))
}

// isUnsetGlobal reports whether tp is otel's placeholder global provider, the
// one otel.GetTracerProvider returns until otel.SetTracerProvider is called.
func isUnsetGlobal(tp trace.TracerProvider) bool {
	return reflect.TypeOf(tp).String() == "*global.tracerProvider"
}

// currentTracer returns the tracer for a request starting now (nil: no span).
func (t *Telemetry) currentTracer() trace.Tracer {
	if !t.global {
		return t.tracer
	}
	tp := otel.GetTracerProvider()
	if t.unsetGlobal != nil && tp == t.unsetGlobal {
		return nil
	}
	if reflect.ValueOf(tp).Kind() != reflect.Pointer {
		return t.tracerOf(tp) // not comparable for sure: no cache
	}
	if c := t.globalCache.Load(); c != nil && c.tp == tp {
		return c.tracer
	}
	c := &tracerFor{tp: tp, tracer: t.tracerOf(tp)}
	t.globalCache.Store(c)
	return c.tracer
}
