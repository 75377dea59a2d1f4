// Package route computes route keys: the value that decides which pooled
// connections are interchangeable. Two requests may share a connection only when
// their keys are equal (as Apache HttpClient's routes decide re-use): same scheme,
// host and port, same proxy (and proxy credentials), same TLS configuration and
// same caller identity. The package holds pure values: no goroutines, no I/O.
package route

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Key identifies a route. It is comparable and can be used as a map key.
// The zero Key is not a valid route.
type Key struct {
	Scheme string // "http" or "https"
	Host   string // lower-case host name or IP literal, without brackets
	Port   string // decimal port, always set ("80", "443" by default)

	// Proxy is the proxy URL without credentials ("http://proxy:3128"), empty when direct.
	Proxy string
	// ProxyAuth distinguishes proxy credentials without holding them: a keyed hash
	// of the user info (see ProxyAuthOf), empty when the proxy URL has none. Two
	// credentials are two routes, because a proxy authorises a tunnel per
	// credential. The credentials themselves travel in a Credentials store.
	ProxyAuth string
	// TLS identifies the TLS configuration the connection was made with, empty for
	// the client's default. Connections made under different configurations (other
	// client certificates, roots or server names) are never interchangeable.
	TLS string
	// Identity is the caller identity (client.WithIdentity), empty when anonymous.
	Identity string
}

// Addr returns host:port of the target, for dialing or for a CONNECT request.
func (k Key) Addr() string { return net.JoinHostPort(k.Host, k.Port) }

// String names the route readably, e.g.
// "https://api.example:443 via http://proxy:3128 as alice". Credentials never appear.
func (k Key) String() string {
	var b strings.Builder
	b.WriteString(k.Scheme)
	b.WriteString("://")
	b.WriteString(k.Addr())
	if k.Proxy != "" {
		b.WriteString(" via ")
		b.WriteString(k.Proxy)
		if k.ProxyAuth != "" {
			b.WriteString(" (auth ")
			b.WriteString(k.ProxyAuth[:min(len(k.ProxyAuth), 8)])
			b.WriteString(")")
		}
	}
	if k.TLS != "" {
		b.WriteString(" tls ")
		b.WriteString(k.TLS)
	}
	if k.Identity != "" {
		b.WriteString(" as ")
		b.WriteString(k.Identity)
	}
	return b.String()
}

// Options are the client-wide inputs of FromRequest. They are read-only.
type Options struct {
	// Proxy selects the proxy for a request, with net/http's signature
	// (http.ProxyFromEnvironment works). Nil means direct.
	Proxy func(*http.Request) (*url.URL, error)
	// TLSIdentity is the key's TLS field for the client's TLS configuration.
	TLSIdentity string
	// Credentials, when set, receives the user info of every proxy URL that has
	// some, so that the dial can authenticate to the proxy while the key holds
	// only a hash. Nil drops them (the dial then sends none).
	Credentials *Credentials
}

// FromRequest computes the route key of req for the caller identity id.
// It returns ErrNilURL, ErrMissingHost, ErrUnsupportedScheme, ErrInvalidPort or
// ErrUnsupportedProxy (wrapped with detail) for requests that cannot be routed, and
// the proxy function's error as is. It does not block and allocates only for the
// proxy and the lower-casing of mixed-case hosts.
//
// A proxy URL's user info is remembered in opt.Credentials (the key keeps only
// its hash); http.ProxyFromEnvironment's NO_PROXY rules apply as the proxy
// function decides.
func FromRequest(req *http.Request, id string, opt Options) (Key, error) {
	if req == nil || req.URL == nil {
		return Key{}, ErrNilURL
	}
	u := req.URL
	var k Key
	switch u.Scheme {
	case "http", "https":
		k.Scheme = u.Scheme
	case "HTTP", "HTTPS", "Http", "Https":
		k.Scheme = strings.ToLower(u.Scheme)
	default:
		return Key{}, fmt.Errorf("%w %q", ErrUnsupportedScheme, u.Scheme)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return Key{}, ErrMissingHost
	}
	k.Host = lower(host)
	if port == "" {
		port = DefaultPort(k.Scheme)
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return Key{}, fmt.Errorf("%w %q", ErrInvalidPort, port)
	}
	k.Port = port
	k.TLS = opt.TLSIdentity
	k.Identity = id
	if opt.Proxy != nil {
		pu, err := opt.Proxy(req)
		if err != nil {
			return Key{}, err
		}
		if pu != nil {
			if err := setProxy(&k, pu, opt.Credentials); err != nil {
				return Key{}, err
			}
		}
	}
	return k, nil
}

// DefaultPort returns the default port of an http or https scheme.
func DefaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// ProxyDefaultPort returns the default port of a proxy scheme.
func ProxyDefaultPort(scheme string) string {
	switch scheme {
	case "https":
		return "443"
	case "socks5", "socks5h":
		return "1080"
	}
	return "80"
}

func setProxy(k *Key, pu *url.URL, creds *Credentials) error {
	scheme := strings.ToLower(pu.Scheme)
	switch scheme {
	case "http", "https", "socks5", "socks5h":
	default:
		return fmt.Errorf("%w %q", ErrUnsupportedProxy, pu.Scheme)
	}
	host, port := pu.Hostname(), pu.Port()
	if host == "" {
		return fmt.Errorf("%w: proxy URL has no host", ErrMissingHost)
	}
	if port == "" {
		port = ProxyDefaultPort(scheme)
	}
	k.Proxy = scheme + "://" + net.JoinHostPort(lower(host), port)
	if pu.User != nil {
		k.ProxyAuth = creds.remember(k.Proxy, pu.User)
	}
	return nil
}

// TLSIdentity returns a stable identity for a TLS configuration: configurations
// with the same identity produce interchangeable connections. Nil is the empty
// identity (the client's default). The identity is the configuration's address:
// two distinct *tls.Config values are two routes even when their fields match,
// which is conservative and cheap. Compute it once per configuration.
func TLSIdentity(cfg *tls.Config) string {
	if cfg == nil {
		return ""
	}
	return fmt.Sprintf("%p", cfg)
}

func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}
