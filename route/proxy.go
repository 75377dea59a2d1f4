package route

import (
	"net"
	"strings"
)

// ProxyScheme returns the scheme of k's proxy ("http", "https", "socks5" or
// "socks5h"), or "" for a direct route.
func (k Key) ProxyScheme() string {
	scheme, _, ok := strings.Cut(k.Proxy, "://")
	if !ok {
		return ""
	}
	return scheme
}

// ProxyAddr returns host:port of k's proxy, or "" for a direct route.
func (k Key) ProxyAddr() string {
	_, addr, ok := strings.Cut(k.Proxy, "://")
	if !ok {
		return ""
	}
	return addr
}

// ProxyHost returns the host name (or IP literal, without brackets) of k's
// proxy, or "" for a direct route: the TLS server name of an https:// proxy.
func (k Key) ProxyHost() string {
	host, _, err := net.SplitHostPort(k.ProxyAddr())
	if err != nil {
		return ""
	}
	return host
}

// AbsoluteForm reports whether requests on k's connections are written in
// absolute-form (RFC 9112 section 3.2.2): plain HTTP targets through an HTTP or
// HTTPS proxy, which forwards each request itself. HTTPS targets go through a
// CONNECT tunnel and SOCKS proxies relay bytes: those requests are origin-form.
func (k Key) AbsoluteForm() bool {
	if k.Scheme != "http" {
		return false
	}
	switch k.ProxyScheme() {
	case "http", "https":
		return true
	}
	return false
}
