package route

import "errors"

// ErrNilURL is returned by FromRequest when the request has no URL.
var ErrNilURL = errors.New("route: request has no URL")

// ErrMissingHost is returned by FromRequest when the URL names no host.
var ErrMissingHost = errors.New("route: URL has no host")

// ErrUnsupportedScheme is returned by FromRequest for schemes other than http and https.
var ErrUnsupportedScheme = errors.New("route: unsupported URL scheme")

// ErrUnsupportedProxy is returned by FromRequest when the proxy function returns a
// proxy URL whose scheme is not http, https or socks5.
var ErrUnsupportedProxy = errors.New("route: unsupported proxy scheme")

// ErrInvalidPort is returned by FromRequest when the URL's port is not a number in 1..65535.
var ErrInvalidPort = errors.New("route: invalid port")
