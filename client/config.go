package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/connactor/connactor/actors"
)

// Config configures a Client. Zero values mean the documented defaults; New
// validates it and nothing in it changes after New returns.
type Config struct {
	// Limits. Zero means the documented default.
	MaxConnsPerRoute      int           // open connections per route (default 8)
	MaxConnsTotal         int           // open connections across all routes (default 64)
	MaxConcurrentRequests int           // requests in flight across the client; more wait FIFO (default 1024)
	LeaseTimeout          time.Duration // longest wait for a connection; 0 = until the request's context ends

	// Lifetimes
	// MaxIdleTime: an idle connection is closed after this (default 90s),
	// and a route left without a connection and unused as long is
	// reclaimed (Stats.RoutesReclaimed): its next request starts it anew.
	MaxIdleTime time.Duration
	// MaxLifetime: a connection is not re-used after this age (default 0 = no
	// limit). Each connection draws its own lifetime from [90%, 100%] of it,
	// so that connections opened together are not retired together; one past
	// its lifetime is retired when it next becomes idle, never mid-request.
	MaxLifetime time.Duration

	// Pool policies (see the README's "Policies"). Zero means the default.
	MaxPendingPerRoute int // callers waiting per route; one more fails at once with ErrQueueFull (0 = unbounded)
	MaxDialsPerRoute   int // dials in flight per route (0 = MaxConnsPerRoute)
	MaxRequestsPerConn int // a connection is retired after serving this many requests (0 = no limit)
	// MaxConnsPerHost caps open connections to one host:port across all its
	// routes (proxies and identities); 0 = no cap. Routes of a host are served
	// in arrival order.
	MaxConnsPerHost int
	// FailFastAfter is how many consecutive failed dials make a route fail
	// calls at once with ErrRouteUnavailable (default 5; negative = never).
	// The route then fails fast for FailFastCooldown (default 1s), lets one
	// probe dial out, and fails fast again for twice as long each time the
	// probe fails, up to FailFastMaxCooldown (default 30s), with ±20% jitter.
	// Connections the route still has keep serving.
	FailFastAfter       int
	FailFastCooldown    time.Duration
	FailFastMaxCooldown time.Duration
	// RetryBudget bounds the replays of requests that failed on a stale
	// re-used connection (see RetryBudget; the zero value is the default).
	RetryBudget RetryBudget

	// Dialing. TLSConfig serves targets and https:// proxies alike (RootCAs,
	// client certificates, ServerName, MinVersion); its NextProtos are replaced
	// by the protocols of Protocols (ALPN), and a session cache is added when it
	// has none, so new connections resume.
	// Proxy may return http://, https:// or socks5:// URLs: plain HTTP targets go
	// through HTTP proxies as absolute-form requests, HTTPS targets through a
	// CONNECT tunnel (a refusal is a *ProxyConnectError). User info in the URL is
	// sent to the proxy only (Proxy-Authorization, or SOCKS5 username/password),
	// never to the target, and never shows in Stats or logs.
	DialTimeout time.Duration                         // default 10s
	TLSConfig   *tls.Config                           // nil = system roots, verification on
	Proxy       func(*http.Request) (*url.URL, error) // nil = direct; http.ProxyFromEnvironment works

	// Protocols the client may use (net/http's type). nil = HTTP/1 and HTTP/2:
	// https routes offer h2 and http/1.1 by ALPN and use what the server picks;
	// http routes use HTTP/1.1. SetUnencryptedHTTP2(true) without HTTP/1 means
	// h2c with prior knowledge on http routes (not through an HTTP proxy).
	// HTTP/1 only turns HTTP/2 off.
	Protocols *http.Protocols
	// HTTP2 tunes HTTP/2 connections (net/http's type): MaxConcurrentStreams is
	// a local cap on streams per connection, StrictMaxConcurrentRequests makes
	// callers wait for a stream instead of opening another connection,
	// SendPingTimeout/PingTimeout are the health check (a connection that fails
	// it closes with reason ping_timeout). nil = net/http's defaults.
	HTTP2 *http.HTTP2Config

	// Embedding and telemetry
	System         *actor.ActorSystem   // nil = the client makes and owns its own
	TracerProvider trace.TracerProvider // nil = otel.GetTracerProvider()
	MeterProvider  metric.MeterProvider // nil = otel.GetMeterProvider()
	Logger         *slog.Logger         // nil = slog.Default()
	// Propagator writes the trace context (and baggage) of each request's client
	// span into its headers (nil = otel.GetTextMapPropagator()). The caller's
	// request is never modified: a copy carries the headers.
	Propagator propagation.TextMapPropagator

	// TLSHandshakeTimeout bounds the TLS handshake (default 10s).
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the response head after the
	// request was written (default 0 = none, as net/http).
	ResponseHeaderTimeout time.Duration
	// ExpectContinueTimeout is how long a request with "Expect: 100-continue"
	// waits for the server's 100 before sending its body (default 1s).
	ExpectContinueTimeout time.Duration
	// MaxResponseHeaderBytes limits the response head (default 10 MiB, as
	// net/http's Transport).
	MaxResponseHeaderBytes int64
	// DisableCompression turns transparent gzip off. As with net/http, when it
	// is false and the caller set neither Accept-Encoding nor Range, requests
	// ask for gzip and gzip responses are decompressed as they are read
	// (resp.Uncompressed is true, Content-Encoding and Content-Length removed).
	DisableCompression bool
	// DialContext dials TCP connections (nil = net.Dialer). Useful to count or
	// redirect dials in tests. Without a Resolver it is given the host name
	// ("host:port") and decides the address; with one, it is given the
	// endpoint the client chose ("ip:port").
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Resolver looks up the hosts the client dials (nil =
	// net.DefaultResolver; *net.Resolver is one). A route to a host name
	// spreads its connections over the addresses it resolves to, and
	// follows DNS when the answer changes (README, "Endpoints"): a new
	// connection goes to the address with the fewest of the route's
	// connections; an address whose dials fail is left alone for a
	// back-off (1 s doubling to 30 s) while others remain; an address that
	// leaves the answer is drained (its idle connections close, the others
	// once their response ends, its HTTP/2 connections take no new stream).
	// Through a proxy, the proxy's addresses are the ones spread over. IP
	// literals are dialed as they are.
	Resolver Resolver
	// DNSRefresh is how often a host is looked up again (±10%): 0 = 30 s
	// (DefaultDNSRefresh); -1 = at every dial, as net/http does (no
	// endpoints: each dial resolves the host and picks its address). A
	// dial that fails to connect makes its host be looked up again sooner
	// (at most once a second). A lookup that fails or finds nothing keeps
	// the last good answer, and says so in Stats (RouteStats.ResolveErr)
	// and in one log line per change. No lookup runs on a request's path:
	// only a route's first connection waits for its host's first lookup.
	DNSRefresh time.Duration
	// HandlerWorkers is how many goroutines run Send's notification handlers
	// (default max(4, GOMAXPROCS)). They start on first use and stop on Close.
	HandlerWorkers int

	// Fleet is a budget per route shared by the nodes of a protoactor
	// cluster (README, "Fleet budgets"): a *fleet.Budget made by fleet.New;
	// nil = no fleet budget. Each node holds a share of it, renewed in the
	// background: the request path sends no cluster message. A route opens
	// connections only within both this node's share and MaxConnsPerRoute.
	// The budget is per route as Stats names it: routes to one upstream
	// through different proxies or with different identities (WithIdentity)
	// have a budget each. The client's actor system is the fleet's (the
	// cluster's): leave System nil (it is taken from Fleet) or set it to the
	// same system. The client never shuts the cluster or its system down:
	// the service does, after closing the client.
	Fleet actors.FleetBudget

	// Outlier ejects an address of a route's host whose exchanges keep
	// failing (README, "Sick endpoints"): nil = addresses are ejected only
	// when dials to them fail.
	Outlier *OutlierPolicy

	// Hedge sends a further attempt of a request whose response head is
	// late, on another connection of its route, and takes the first
	// response head (README, "Hedged requests"); nil = no hedging. Only
	// idempotent requests whose body can be sent again are hedged, and
	// never those made with WithoutHedge.
	Hedge *HedgePolicy

	// Overload control (README, "When an upstream slows down"). Off by
	// default: without these fields nothing changes.
	//
	// Adaptive makes each route choose how many of its requests may be in
	// flight at once (HTTP/1.1 leases plus HTTP/2 streams), between
	// Adaptive.Min and its fixed limit (MaxConnsPerRoute; HTTP/2: the
	// streams its connections allow), from the latency it measures from
	// each request's write to its response head: the limit falls when
	// latency climbs well above the no-load latency it measured (twice it,
	// and 10 ms above it), or when requests in flight time out, and climbs back while latency stays near
	// it. Callers beyond it wait in the route's FIFO. nil = fixed.
	Adaptive *AdaptiveLimit
	// QueueTarget (0 = off): a route whose queue stands sheds its callers
	// who wait longer than this, as Facebook's servers apply CoDel: once
	// its queue has not been empty for 100 ms, every caller that has
	// waited longer than QueueTarget is refused at once with ErrOverloaded
	// (ErrNotSent), oldest first, until the queue empties. A burst that
	// drains within 100 ms is never shed.
	QueueTarget time.Duration

	fault actors.FaultHook // fault injection (tests of this package only)
}

// AdaptiveLimit configures each route's adaptive limit (Config.Adaptive).
type AdaptiveLimit struct {
	Min     int // the limit never falls below this (default 1)
	Initial int // a new route's limit (default min(8, its fixed limit))
}

// Defaults of Config's zero values.
const (
	DefaultMaxConnsPerRoute       = 8
	DefaultMaxConnsTotal          = 64
	DefaultMaxConcurrentRequests  = 1024
	DefaultMaxIdleTime            = 90 * time.Second
	DefaultDialTimeout            = 10 * time.Second
	DefaultTLSHandshakeTimeout    = 10 * time.Second
	DefaultExpectContinueTimeout  = time.Second
	DefaultMaxResponseHeaderBytes = 10 << 20
	DefaultFailFastAfter          = 5
	DefaultFailFastCooldown       = time.Second
	DefaultFailFastMaxCooldown    = 30 * time.Second
	DefaultDNSRefresh             = 30 * time.Second
)

// withDefaults validates cfg and fills its defaults.
func (cfg Config) withDefaults() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxConnsPerRoute", int64(cfg.MaxConnsPerRoute)},
		{"MaxConnsTotal", int64(cfg.MaxConnsTotal)},
		{"MaxConcurrentRequests", int64(cfg.MaxConcurrentRequests)},
		{"LeaseTimeout", int64(cfg.LeaseTimeout)},
		{"MaxIdleTime", int64(cfg.MaxIdleTime)},
		{"MaxLifetime", int64(cfg.MaxLifetime)},
		{"DialTimeout", int64(cfg.DialTimeout)},
		{"TLSHandshakeTimeout", int64(cfg.TLSHandshakeTimeout)},
		{"ResponseHeaderTimeout", int64(cfg.ResponseHeaderTimeout)},
		{"ExpectContinueTimeout", int64(cfg.ExpectContinueTimeout)},
		{"MaxResponseHeaderBytes", cfg.MaxResponseHeaderBytes},
		{"HandlerWorkers", int64(cfg.HandlerWorkers)},
		{"MaxPendingPerRoute", int64(cfg.MaxPendingPerRoute)},
		{"MaxDialsPerRoute", int64(cfg.MaxDialsPerRoute)},
		{"MaxRequestsPerConn", int64(cfg.MaxRequestsPerConn)},
		{"MaxConnsPerHost", int64(cfg.MaxConnsPerHost)},
		{"FailFastCooldown", int64(cfg.FailFastCooldown)},
		{"FailFastMaxCooldown", int64(cfg.FailFastMaxCooldown)},
		{"RetryBudget.Window", int64(cfg.RetryBudget.Window)},
		{"RetryBudget.MinPerSecond", int64(cfg.RetryBudget.MinPerSecond)},
	} {
		if f.v < 0 {
			return bad("%s is negative (%d)", f.name, f.v)
		}
	}
	def := func(p *int, d int) {
		if *p == 0 {
			*p = d
		}
	}
	defD := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	def(&cfg.MaxConnsTotal, DefaultMaxConnsTotal)
	def(&cfg.MaxConnsPerRoute, min(DefaultMaxConnsPerRoute, cfg.MaxConnsTotal))
	def(&cfg.MaxConcurrentRequests, DefaultMaxConcurrentRequests)
	def(&cfg.HandlerWorkers, max(4, runtime.GOMAXPROCS(0)))
	defD(&cfg.MaxIdleTime, DefaultMaxIdleTime)
	defD(&cfg.DialTimeout, DefaultDialTimeout)
	defD(&cfg.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	defD(&cfg.ExpectContinueTimeout, DefaultExpectContinueTimeout)
	if cfg.MaxResponseHeaderBytes == 0 {
		cfg.MaxResponseHeaderBytes = DefaultMaxResponseHeaderBytes
	}
	def(&cfg.MaxDialsPerRoute, cfg.MaxConnsPerRoute)
	switch {
	case cfg.DNSRefresh < -1:
		return bad("DNSRefresh is below -1 (%v): -1 resolves at every dial", cfg.DNSRefresh)
	case cfg.DNSRefresh == 0:
		cfg.DNSRefresh = DefaultDNSRefresh
	}
	def(&cfg.FailFastAfter, DefaultFailFastAfter)
	defD(&cfg.FailFastCooldown, DefaultFailFastCooldown)
	defD(&cfg.FailFastMaxCooldown, DefaultFailFastMaxCooldown)
	if cfg.FailFastMaxCooldown < cfg.FailFastCooldown {
		return bad("FailFastMaxCooldown (%v) is below FailFastCooldown (%v)", cfg.FailFastMaxCooldown, cfg.FailFastCooldown)
	}
	if p := cfg.Protocols; p != nil && !p.HTTP1() && !p.HTTP2() && !p.UnencryptedHTTP2() {
		return bad("Protocols enables no protocol")
	}
	if err := cfg.RetryBudget.fill(); err != nil {
		return bad("%v", err)
	}
	if cfg.MaxConnsPerRoute > cfg.MaxConnsTotal {
		return bad("MaxConnsPerRoute (%d) exceeds MaxConnsTotal (%d)", cfg.MaxConnsPerRoute, cfg.MaxConnsTotal)
	}
	if cfg.QueueTarget < 0 {
		return bad("QueueTarget is negative (%v)", cfg.QueueTarget)
	}
	if a := cfg.Adaptive; a != nil {
		switch {
		case a.Min < 0 || a.Initial < 0:
			return bad("Adaptive.Min (%d) and Adaptive.Initial (%d) must not be negative", a.Min, a.Initial)
		case a.Min > cfg.MaxConnsPerRoute:
			return bad("Adaptive.Min (%d) exceeds MaxConnsPerRoute (%d)", a.Min, cfg.MaxConnsPerRoute)
		case a.Initial > 0 && a.Initial < a.Min:
			return bad("Adaptive.Initial (%d) is below Adaptive.Min (%d)", a.Initial, a.Min)
		}
		filled := *a
		if filled.Min == 0 {
			filled.Min = 1
		}
		cfg.Adaptive = &filled // the caller's value is not kept: Config does not change after New
	}
	if err := cfg.fleetDefaults(); err != nil {
		return bad("%v", err)
	}
	if err := cfg.outlierDefaults(); err != nil {
		return bad("%v", err)
	}
	if err := cfg.hedgeDefaults(); err != nil {
		return bad("%v", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}

// expiryInterval is how often the supervisor looks for expired idle connections:
// a quarter of MaxIdleTime, between 10ms and 1s.
func (cfg *Config) expiryInterval() time.Duration {
	d := cfg.MaxIdleTime / 4
	if cfg.MaxLifetime > 0 && cfg.MaxLifetime/4 < d {
		d = cfg.MaxLifetime / 4
	}
	return max(10*time.Millisecond, min(d, time.Second))
}
