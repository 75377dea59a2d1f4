package conn

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http/httptrace"
	"slices"

	"github.com/connactor/connactor/route"
)

// dialTimed opens the socket of route k, whose target is addr (k.Addr()): TCP
// to the target (or the way through k's proxy, see dialProxy), then TLS for
// https. It is bounded by ctx (DialTimeout and the actor's stop), and adds the
// time its TCP connects and TLS handshakes take to times (when not nil).
func dialTimed(ctx context.Context, k route.Key, addr string, opt *Options, times *dialTimes) (net.Conn, error) {
	var nc net.Conn
	var err error
	if k.Proxy != "" {
		nc, err = dialProxy(ctx, k, opt, times)
	} else {
		nc, err = dialTCP(ctx, addr, opt, times)
	}
	if err != nil {
		return nil, err
	}
	if k.Scheme == "https" {
		tc, err := handshake(ctx, nc, k.Host, opt, opt.alpn(), times)
		if err != nil {
			nc.Close()
			return nil, err
		}
		return tc, nil
	}
	return nc, nil
}

// ALPN lists; shared, never modified.
var (
	alpnHTTP11 = []string{"http/1.1"}
	alpnBoth   = []string{"h2", "http/1.1"}
	alpnH2     = []string{"h2"}
)

// alpn is the ALPN list of a target's handshake (Options.ALPN; nil = http/1.1).
func (opt *Options) alpn() []string {
	if len(opt.ALPN) == 0 {
		return alpnHTTP11
	}
	return opt.ALPN
}

// ALPNFor returns the ALPN list a client offers: h2 and http/1.1 when both are
// enabled (the server picks), one of them otherwise.
func ALPNFor(http1, http2 bool) []string {
	switch {
	case http1 && http2:
		return alpnBoth
	case http2:
		return alpnH2
	}
	return alpnHTTP11
}

// dialTCP dials addr, adding the time it takes (name resolution included) to
// times.connect. The ConnectStart/ConnectDone (and DNS) hooks of a
// ClientTrace in ctx are fired by net.Dialer itself, per address tried, as in
// net/http: httptrace.WithClientTrace installs them where the dialer looks.
func dialTCP(ctx context.Context, addr string, opt *Options, times *dialTimes) (net.Conn, error) {
	start := times.now()
	var nc net.Conn
	var err error
	if opt.DialContext != nil {
		nc, err = opt.DialContext(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	times.addConnect(start)
	return nc, err
}

// handshake runs the TLS client handshake over nc for serverName, advertising
// alpn: the client's protocols for a target (h2 and http/1.1 by default),
// http/1.1 only for an https proxy, whatever the configuration lists. The
// configuration is the client's (cloned, with ServerName set when empty); its
// ClientSessionCache makes later connections resume.
func handshake(ctx context.Context, nc net.Conn, serverName string, opt *Options, alpn []string, times *dialTimes) (*tls.Conn, error) {
	cfg := opt.TLSConfig
	if cfg == nil {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" || !slices.Equal(cfg.NextProtos, alpn) {
		cfg = cfg.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = serverName
		}
		cfg.NextProtos = alpn
	}
	if opt.TLSHandshakeTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opt.TLSHandshakeTimeout)
		defer cancel()
	}
	trace := httptrace.ContextClientTrace(ctx)
	if trace != nil && trace.TLSHandshakeStart != nil {
		trace.TLSHandshakeStart()
	}
	tc := tls.Client(nc, cfg)
	start := times.now()
	err := tc.HandshakeContext(ctx)
	times.addTLS(start)
	if trace != nil && trace.TLSHandshakeDone != nil {
		trace.TLSHandshakeDone(tc.ConnectionState(), err)
	}
	if err != nil {
		return nil, fmt.Errorf("conn: TLS handshake with %s: %w", serverName, err)
	}
	return tc, nil
}
