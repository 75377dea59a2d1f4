package telemetry

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Request is the telemetry of one HTTP request: a client span and the request
// metrics, from RoundTrip until its exchange is over (body read to EOF or
// closed) or it failed. The front door calls its methods in this order:
// LeaseGranted and Retry while it runs, then either Responded and ExchangeDone
// (in any order, possibly from different goroutines) or Failed. The nil
// *Request records nothing.
type Request struct {
	t         *Telemetry
	ctx       context.Context // carries the span
	span      trace.Span      // nil when not tracing
	recording bool
	route     *Route
	method    string // normalised: a known method or "_OTHER"
	start     time.Time
	active    bool // counted in http.client.active_requests
	durations bool // http.client.request.duration enabled
	errType   string
	h2        bool         // the latest lease was an HTTP/2 stream (LeaseGranted)
	parts     atomic.Int32 // Responded and ExchangeDone still to come
}

// LeaseInfo is what the front door learned from the lease of one attempt.
type LeaseInfo struct {
	Waited   time.Duration // time in the route's queue
	QueuePos int           // position in the queue on arrival (1 = first); 0 = served at once
	Reused   bool          // the connection served earlier requests
	IdleTime time.Duration // how long it was idle before this lease
	// The connection's dial, reported with its first lease only (zero otherwise).
	Dial, Connect, TLS time.Duration
	// PeerAddr is the connection's remote address (net.Conn.RemoteAddr): the
	// server's, or the proxy's when the request goes through one. It becomes
	// the span's network.peer.address and network.peer.port; nil sets neither.
	PeerAddr net.Addr
	// HTTP2 reports that the lease is a stream of an HTTP/2 connection: the
	// request's network.protocol.version is "2" from then on, on its span and
	// in its metrics, also when it fails (a response's own version wins).
	HTTP2 bool
}

// clientKind is the start option of every client span (allocated once).
var clientKind = trace.WithSpanKind(trace.SpanKindClient)

// StartRequest starts the telemetry of req, going to scheme://host:port (the
// route's target, not the proxy). It returns the request to send: req itself,
// or, when the propagator has headers to add (trace context, baggage), a shallow
// copy with a cloned Header carrying them (req is never modified). It returns a
// nil *Request, at the cost of two boolean checks, when neither tracing nor
// request metrics are enabled. Safe for concurrent use.
func (t *Telemetry) StartRequest(ctx context.Context, req *http.Request, scheme, host, port string) (*http.Request, *Request) {
	if t == nil {
		return req, nil
	}
	durations := t.reqDuration.Enabled(ctx)
	active := t.activeEnabled()
	tracer := t.currentTracer()
	if tracer == nil && !durations && !active {
		return t.inject(ctx, req), nil // no span of ours: the caller's trace context still propagates
	}
	r := &Request{t: t, ctx: ctx, route: t.Route(scheme, host, port), method: normMethod(req.Method),
		start: time.Now(), active: active, durations: durations}
	r.parts.Store(2)
	if tracer == nil {
		req = t.inject(ctx, req)
	} else {
		name := r.method
		if name == "_OTHER" {
			name = "HTTP"
		}
		// The attributes are set once the span is known to record: a span that
		// does not (no SDK installed, or not sampled) then costs no URL string
		// and no attribute slice. Samplers see the span's name and kind.
		r.ctx, r.span = tracer.Start(ctx, name, clientKind)
		r.recording = r.span.IsRecording()
		if r.recording {
			attrs := make([]attribute.KeyValue, 0, 5)
			attrs = append(attrs,
				semconv.HTTPRequestMethodKey.String(r.method),
				semconv.URLFull(redactedURL(req.URL)),
				semconv.ServerAddress(host),
				semconv.ServerPort(r.route.port),
			)
			if r.method == "_OTHER" {
				attrs = append(attrs, semconv.HTTPRequestMethodOriginal(req.Method))
			}
			r.span.SetAttributes(attrs...)
		}
		req = t.inject(r.ctx, req)
	}
	if active {
		r.route.startActive()
	}
	return req, r
}

// inject adds the propagator's headers for ctx to a copy of req.
func (t *Telemetry) inject(ctx context.Context, req *http.Request) *http.Request {
	if !trace.SpanContextFromContext(ctx).IsValid() && baggage.FromContext(ctx).Len() == 0 {
		return req
	}
	carrier := propagation.HeaderCarrier(http.Header{})
	t.prop.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return req
	}
	out := *req
	out.Header = req.Header.Clone()
	if out.Header == nil {
		out.Header = make(http.Header, len(carrier))
	}
	for k, v := range carrier {
		out.Header[k] = v
	}
	return &out
}

// LeaseGranted adds the span events of one attempt's lease: the pool wait (with
// its duration and queue position), the dial and TLS handshake of a new
// connection, or the re-use of a pooled one; and the connection's peer address
// and protocol (a retry's lease replaces the first one's; the span gets
// network.protocol.version when it ends, from the response or, when it
// failed, from the lease).
func (r *Request) LeaseGranted(l LeaseInfo) {
	if r == nil {
		return
	}
	r.h2 = l.HTTP2
	if !r.recording {
		return
	}
	if host, port, ok := splitAddr(l.PeerAddr); ok {
		if port > 0 {
			r.span.SetAttributes(semconv.NetworkPeerAddress(host), semconv.NetworkPeerPort(port))
		} else {
			r.span.SetAttributes(semconv.NetworkPeerAddress(host))
		}
	}
	if l.QueuePos > 0 || l.Waited > 0 {
		r.span.AddEvent(EventPoolWait, trace.WithAttributes(
			AttrWait.Float64(l.Waited.Seconds()), AttrQueuePos.Int(l.QueuePos)))
	}
	if l.Dial > 0 {
		r.span.AddEvent(EventDial, trace.WithAttributes(
			AttrDial.Float64(l.Dial.Seconds()), AttrConnect.Float64(l.Connect.Seconds())))
		if l.TLS > 0 {
			r.span.AddEvent(EventTLS, trace.WithAttributes(AttrTLS.Float64(l.TLS.Seconds())))
		}
	}
	if l.Reused {
		r.span.AddEvent(EventReused, trace.WithAttributes(AttrIdleTime.Float64(l.IdleTime.Seconds())))
	}
}

// Retry records that the request is replayed on a fresh connection after err on
// a re-used one.
func (r *Request) Retry(err error) {
	if r == nil {
		return
	}
	r.t.retries.Add(r.ctx, 1, r.route.opt)
	if r.recording {
		r.span.AddEvent(EventRetry, trace.WithAttributes(semconv.ErrorTypeKey.String(ErrorType(err)),
			attribute.String("exception.message", err.Error())))
		r.span.SetAttributes(semconv.HTTPRequestResendCount(1))
	}
	if r.t.log.Enabled(r.ctx, slog.LevelDebug) {
		r.t.log.LogAttrs(r.ctx, slog.LevelDebug, "connactor: retrying on a fresh connection",
			slog.String("method", r.method), slog.String("server", r.route.address), slog.Any("err", err))
	}
}

// RetryRefused records that a replay was not made because retries exceeded
// the client's retry budget: the error is returned instead.
func (r *Request) RetryRefused(err error) {
	if r == nil {
		return
	}
	r.t.retryRefused.Add(r.ctx, 1, r.route.opt)
	if r.recording {
		r.span.AddEvent(EventRetryRefused, trace.WithAttributes(semconv.ErrorTypeKey.String(ErrorType(err))))
	}
}

// LeaseTimedOut records that no connection was leased within LeaseTimeout; a
// Failed call follows.
func (r *Request) LeaseTimedOut(d time.Duration) {
	if r == nil {
		return
	}
	r.errType = ErrorTypeLeaseTimeout
	r.t.leaseTimeout.Add(r.ctx, 1, r.route.opt)
	if r.t.log.Enabled(r.ctx, slog.LevelInfo) {
		r.t.log.LogAttrs(r.ctx, slog.LevelInfo, "connactor: lease timed out",
			slog.String("server", r.route.address), slog.Int("port", r.route.port), slog.Duration("after", d))
	}
}

// Responded records the response head: its status and the request duration
// (measured to the response head, as otelhttp does; the span itself lasts until
// ExchangeDone).
func (r *Request) Responded(resp *http.Response) {
	if r == nil {
		return
	}
	code, proto := resp.StatusCode, protocolVersion(resp)
	if r.recording {
		r.span.SetAttributes(semconv.HTTPResponseStatusCode(code), semconv.NetworkProtocolVersion(proto))
		if code >= 400 {
			// Client spans: 4xx and 5xx are errors (semantic conventions, HTTP spans).
			r.span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(code)))
			r.span.SetStatus(codes.Error, "")
		}
	}
	if r.durations {
		r.t.reqDuration.Inst().Record(r.ctx, time.Since(r.start).Seconds(), r.route.durationOpt(r.method, proto, code, ""))
	}
	r.done()
}

// ExchangeDone records the end of the exchange (body read to EOF, closed, or
// failed while read). It may run before Responded (no body) or after it, on
// the goroutine that read or closed the body.
func (r *Request) ExchangeDone() {
	if r == nil {
		return
	}
	r.done()
}

func (r *Request) done() {
	if r.parts.Add(-1) == 0 {
		r.end()
	}
}

// Failed records a transport failure (or a lease timeout, or the context's end):
// the span ends with an error status and error.type.
func (r *Request) Failed(err error) {
	if r == nil {
		return
	}
	et := r.errType
	if et == "" {
		et = ErrorType(err)
	}
	if r.recording {
		r.span.SetAttributes(semconv.ErrorTypeKey.String(et), semconv.NetworkProtocolVersion(r.leaseProtocol()))
		r.span.SetStatus(codes.Error, err.Error())
	}
	if r.durations {
		r.t.reqDuration.Inst().Record(r.ctx, time.Since(r.start).Seconds(), r.route.durationOpt(r.method, r.leaseProtocol(), 0, et))
	}
	if r.t.log.Enabled(r.ctx, slog.LevelDebug) {
		r.t.log.LogAttrs(r.ctx, slog.LevelDebug, "connactor: request failed",
			slog.String("method", r.method), slog.String("server", r.route.address), slog.String("error.type", et), slog.Any("err", err))
	}
	if r.parts.Swap(0) > 0 {
		r.end()
	}
	// A Route no route actor took was refused before it reached one: it is
	// forgotten now, or, while http.client.active_requests lists it, by the
	// collection that drops it (active.go), so that requests refused to one
	// host all find the one Route the list holds.
	if !r.route.inFlight.listed.Load() {
		r.route.forgetUntaken()
	}
}

func (r *Request) end() {
	if r.active {
		r.route.endActive()
	}
	if r.span != nil {
		r.span.End()
	}
}

type durationKey struct {
	method  string
	proto   string
	code    int
	errType string
}

// durationOpt returns the attributes of http.client.request.duration for a
// response with status code over protocol version proto (errType "") or a
// failure of type errType (code 0), built once per combination: a request then
// costs a map lookup, not a sorted attribute set.
func (r *Route) durationOpt(method, proto string, code int, errType string) metric.MeasurementOption {
	k := durationKey{method, proto, code, errType}
	if v, ok := r.durations.Load(k); ok {
		return v.(metric.MeasurementOption)
	}
	a := make([]attribute.KeyValue, 0, len(r.kv)+4)
	a = append(a, r.kv...)
	a = append(a, semconv.HTTPRequestMethodKey.String(method), semconv.NetworkProtocolVersion(proto))
	if code > 0 {
		a = append(a, semconv.HTTPResponseStatusCode(code))
		if code >= 400 {
			errType = strconv.Itoa(code)
		}
	}
	if errType != "" {
		a = append(a, semconv.ErrorTypeKey.String(errType))
	}
	v, _ := r.durations.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(a...)))
	return v.(metric.MeasurementOption)
}

// normMethod returns the semantic conventions' value of http.request.method:
// a known method, or "_OTHER".
func normMethod(m string) string {
	switch m {
	case "", http.MethodGet:
		return http.MethodGet
	case http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodConnect,
		http.MethodOptions, http.MethodTrace, http.MethodPatch, "QUERY":
		return m
	}
	return "_OTHER"
}

// redactedURL is url.full without credentials: user info and the query values
// the semantic conventions name as sensitive are replaced by REDACTED.
func redactedURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	if u.User == nil && !sensitiveQuery(u.RawQuery) {
		return u.String()
	}
	c := *u
	if c.User != nil {
		c.User = url.UserPassword("REDACTED", "REDACTED")
	}
	if sensitiveQuery(c.RawQuery) {
		q := c.Query()
		for _, k := range sensitiveKeys {
			if q.Has(k) {
				q.Set(k, "REDACTED")
			}
		}
		c.RawQuery = q.Encode()
	}
	return c.String()
}

var sensitiveKeys = []string{"AWSAccessKeyId", "Signature", "sig", "X-Goog-Signature"}

func sensitiveQuery(q string) bool {
	if q == "" {
		return false
	}
	for _, k := range sensitiveKeys {
		if strings.Contains(q, k+"=") {
			return true
		}
	}
	return false
}

// splitAddr returns the host (an IP address, or a Unix socket's name) and port
// of a connection's address; ok is false for nil.
func splitAddr(a net.Addr) (host string, port int, ok bool) {
	switch a := a.(type) {
	case nil:
		return "", 0, false
	case *net.TCPAddr:
		if a == nil {
			return "", 0, false
		}
		return a.IP.String(), a.Port, true
	case *net.UnixAddr:
		if a == nil {
			return "", 0, false
		}
		return a.Name, 0, true
	}
	s := a.String()
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return s, 0, true
	}
	port, _ = strconv.Atoi(p)
	return h, port, true
}

// leaseProtocol is network.protocol.version before a response says it: the
// latest lease's, "1.1" when it was no HTTP/2 stream or there was none.
func (r *Request) leaseProtocol() string {
	if r.h2 {
		return "2"
	}
	return "1.1"
}

// protocolVersion is network.protocol.version: "1.1", "1.0" or "2".
func protocolVersion(resp *http.Response) string {
	switch {
	case resp.ProtoMajor == 2:
		return "2"
	case resp.ProtoMajor == 1 && resp.ProtoMinor == 0:
		return "1.0"
	}
	return "1.1"
}
