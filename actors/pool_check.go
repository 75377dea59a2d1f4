package actors

import (
	"fmt"
	"net/http"

	"golang.org/x/net/http/httpguts"

	"github.com/connactor/connactor/route"
)

// Key returns the route of req, made on behalf of identity (the empty
// identity is the anonymous one): the request's scheme, host and port, the
// proxy PoolConfig.Proxy picks for it, the proxy's credentials and the
// identity. It refuses, with ErrNotSent, requests that cannot be sent: an
// invalid request (ErrInvalidRequest), an unsupported scheme or proxy, and
// every request once the pool is closing (ErrClosed, unwrapped). It does not
// block.
func (p *Pool) Key(req *http.Request, identity string) (route.Key, error) {
	if err := validate(req); err != nil {
		return route.Key{}, NotSent(err)
	}
	if p.Closing() {
		return route.Key{}, ErrClosed
	}
	key, err := route.FromRequest(req, identity, p.routeOpt)
	if err != nil {
		return route.Key{}, NotSent(err)
	}
	return key, nil
}

// validate refuses, before anything is written, requests net/http's writer would
// send mangled or that would allow header injection. The messages are
// net/http's, which libraries match.
func validate(req *http.Request) error {
	if req == nil {
		return invalid("http: nil Request")
	}
	if req.URL == nil {
		return invalid("http: nil Request.URL")
	}
	if req.Method != "" && !validMethod(req.Method) {
		return invalid(fmt.Sprintf("net/http: invalid method %q", req.Method))
	}
	if req.Host != "" && !httpguts.ValidHostHeader(req.Host) {
		return invalid(fmt.Sprintf("http: invalid Host header %q", req.Host))
	}
	for _, h := range []http.Header{req.Header, req.Trailer} {
		for k, vv := range h {
			if !httpguts.ValidHeaderFieldName(k) {
				return invalid(fmt.Sprintf("net/http: invalid header field name %q", k))
			}
			for _, v := range vv {
				if !httpguts.ValidHeaderFieldValue(v) {
					return invalid(fmt.Sprintf("net/http: invalid header field value for %q", k))
				}
			}
		}
	}
	return nil
}

func validMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		if !httpguts.IsTokenRune(rune(m[i])) {
			return false
		}
	}
	return true
}

// invalidRequestError is a request refused before anything was written:
// errors.Is(err, ErrInvalidRequest), with net/http's text.
type invalidRequestError struct{ msg string }

func invalid(msg string) error { return &invalidRequestError{msg} }

func (e *invalidRequestError) Error() string        { return e.msg }
func (e *invalidRequestError) Is(target error) bool { return target == ErrInvalidRequest }
