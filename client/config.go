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

	"github.com/connactor/connactor/actors"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
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
	MaxIdleTime time.Duration // an idle connection is closed after this (default 90s)
	MaxLifetime time.Duration // a connection is not re-used after this age (default 0 = no limit)

	// Dialing. TLSConfig serves targets and https:// proxies alike (RootCAs,
	// client certificates, ServerName, MinVersion); ALPN offers http/1.1 only,
	// and a session cache is added when it has none, so new connections resume.
	// Proxy may return http://, https:// or socks5:// URLs: plain HTTP targets go
	// through HTTP proxies as absolute-form requests, HTTPS targets through a
	// CONNECT tunnel (a refusal is a *ProxyConnectError). User info in the URL is
	// sent to the proxy only (Proxy-Authorization, or SOCKS5 username/password),
	// never to the target, and never shows in Stats or logs.
	DialTimeout time.Duration                         // default 10s
	TLSConfig   *tls.Config                           // nil = system roots, verification on
	Proxy       func(*http.Request) (*url.URL, error) // nil = direct; http.ProxyFromEnvironment works

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
	// redirect dials in tests.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// HandlerWorkers is how many goroutines run Send's notification handlers
	// (default max(4, GOMAXPROCS)). They start on first use and stop on Close.
	HandlerWorkers int

	fault actors.FaultHook // fault injection (tests of this package only)
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
	if cfg.MaxConnsPerRoute > cfg.MaxConnsTotal {
		return bad("MaxConnsPerRoute (%d) exceeds MaxConnsTotal (%d)", cfg.MaxConnsPerRoute, cfg.MaxConnsTotal)
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
