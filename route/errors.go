package route

import "errors"

// ErrNilURL is returned by FromRequest when the request has no URL.
var ErrNilURL = errors.New("route: request has no URL")

// ErrMissingHost is returned by FromRequest when the URL names no host. Its
// text is net/http's, which callers match.
var ErrMissingHost = errors.New("http: no Host in request URL")

// ErrUnsupportedScheme is returned by FromRequest for schemes other than http
// and https, as `unsupported protocol scheme "ftp"`: net/http's wording, which
// retry libraries match (hashicorp/go-retryablehttp does not retry it).
var ErrUnsupportedScheme = errors.New("unsupported protocol scheme")

// ErrUnsupportedProxy is returned by FromRequest when the proxy function returns a
// proxy URL whose scheme is not http, https or socks5.
var ErrUnsupportedProxy = errors.New("route: unsupported proxy scheme")

// ErrInvalidPort is returned by FromRequest when the URL's port is not a number in 1..65535.
var ErrInvalidPort = errors.New("route: invalid port")
