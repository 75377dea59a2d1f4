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
// to the target (or the way through k's proxy, see dialProxy), to dl's
// endpoints when it names some, then TLS for https. It is bounded by ctx
// (DialTimeout and the actor's stop), and records in dl (when not nil) where
// its TCP connection went and how long its TCP connects and TLS handshakes
// took.
func dialTimed(ctx context.Context, k route.Key, addr string, opt *Options, dl *dialLog) (net.Conn, error) {
	var nc net.Conn
	var err error
	if k.Proxy != "" {
		nc, err = dialProxy(ctx, k, opt, dl)
	} else {
		nc, err = dialTCP(ctx, addr, opt, dl)
	}
	if err != nil {
		return nil, err
	}
	if k.Scheme == "https" {
		tc, err := handshake(ctx, nc, k.Host, opt, opt.alpn(), dl)
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

// dialTCP dials addr: dl's endpoints when it names some (the host is not
// resolved again), otherwise the host through Options.Resolver when set, or
// as given to DialContext or a net.Dialer. It adds the time it takes (name
// resolution included) to dl's connect time, and records where the
// connection went. The ConnectStart/ConnectDone (and DNS) hooks of a
// ClientTrace in ctx are fired by net.Dialer itself, per address tried, as in
// net/http: httptrace.WithClientTrace installs them where the dialer looks.
func dialTCP(ctx context.Context, addr string, opt *Options, dl *dialLog) (net.Conn, error) {
	start := dl.now()
	var nc net.Conn
	var err error
	switch to := dl.endpoints(); {
	case to.Primary.IsValid():
		nc, err = dialEndpoints(ctx, to, opt, dl)
	case opt.Resolver != nil:
		nc, err = resolveDial(ctx, addr, opt, dl)
	default:
		nc, err = dialDirect(ctx, addr, opt)
	}
	dl.addConnect(start)
	if err == nil && dl != nil && !dl.peer.IsValid() {
		dl.peer = remoteAddrPort(nc)
	}
	return nc, err
}

// handshake runs the TLS client handshake over nc for serverName, advertising
// alpn: the client's protocols for a target (h2 and http/1.1 by default),
// http/1.1 only for an https proxy, whatever the configuration lists. The
// configuration is the client's (cloned, with ServerName set when empty); its
// ClientSessionCache makes later connections resume.
func handshake(ctx context.Context, nc net.Conn, serverName string, opt *Options, alpn []string, dl *dialLog) (*tls.Conn, error) {
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
	start := dl.now()
	err := tc.HandshakeContext(ctx)
	dl.addTLS(start)
	if trace != nil && trace.TLSHandshakeDone != nil {
		trace.TLSHandshakeDone(tc.ConnectionState(), err)
	}
	if err != nil {
		return nil, fmt.Errorf("conn: TLS handshake with %s: %w", serverName, err)
	}
	return tc, nil
}
