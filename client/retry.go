package client

import (
	"errors"
	"net/http"

	"github.com/connactor/connactor/conn"
)

// replayable decides whether a request that failed on a re-used connection may
// be sent again on a new one, and returns the request to send. It is the one
// retry RoundTrip makes (golang/go#22158 and #19943 are net/http users hitting
// the stale-connection race; square/okhttp#8472 is a client replaying POSTs it
// should not):
//
//   - a response that had started (any byte read) is never replayed;
//   - a stale connection found before anything was written (the idle watch saw
//     the server's close) replays the very same request: its body is untouched;
//   - otherwise the request must be idempotent (RFC 9110 section 9.2.2, or an
//     Idempotency-Key header) if anything was written, and its body must be
//     replayable: none, or GetBody.
//
// A request whose context has ended is not replayed.
func replayable(req *http.Request, err error) (*http.Request, bool) {
	var ee *conn.ExchangeError
	if !errors.As(err, &ee) || ee.GotByte || req.Context().Err() != nil {
		return nil, false
	}
	if !ee.Written && errors.Is(err, conn.ErrStaleConn) {
		return req, true
	}
	if ee.Written && !idempotent(req) {
		return nil, false
	}
	return rewound(req)
}

// rewound returns req with its body from the start, for a replay: req itself
// when it has no body, a copy with GetBody's body, or false when the body
// cannot be had again.
func rewound(req *http.Request) (*http.Request, bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	body, gerr := req.GetBody()
	if gerr != nil {
		return nil, false
	}
	next := *req
	next.Body = body
	return &next, true
}

// idempotent reports whether the server may see req twice without harm: the
// idempotent methods of RFC 9110 section 9.2.2 (GET, HEAD, OPTIONS, TRACE, PUT,
// DELETE), or any method with an Idempotency-Key or X-Idempotency-Key header
// (the convention net/http honours, golang/go#19943).
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	_, k1 := req.Header["Idempotency-Key"]
	_, k2 := req.Header["X-Idempotency-Key"]
	return k1 || k2
}
