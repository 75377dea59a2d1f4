package client

import (
	"fmt"
	"net/http"

	"golang.org/x/net/http/httpguts"
)

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

func closeBody(req *http.Request) {
	if req != nil && req.Body != nil {
		req.Body.Close()
	}
}
