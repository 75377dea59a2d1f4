package actors

import (
	"errors"
	"net/http"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/conn/h2"
)

// Replay says whether, and how, a failed attempt may be sent again.
type Replay uint8

const (
	// NoReplay: the attempt's error is the request's.
	NoReplay Replay = iota
	// ReplayStale: a re-used HTTP/1.1 connection failed before any response
	// byte, and replaying is safe (see Exchange.Replay). The caller decides
	// (its retry budget, its hooks) and replays on a fresh connection, not the
	// failed one.
	ReplayStale
	// ReplayRefused: the server refused the HTTP/2 stream before processing
	// it (GOAWAY above its last stream id, REFUSED_STREAM): the request is
	// replayed on another connection, whatever the budget.
	ReplayRefused
	// LeaseAgain: the leased HTTP/1.1 connection was found dead before
	// anything was written to it (the probe before writing, or the idle
	// watch, saw the server's close): a bad idle connection, which the route
	// discards. The request never left, so this is no replay: it is sent as
	// it is on another lease, as many times as that takes (net/http does the
	// same), each lease bounded by the request's context and LeaseTimeout as
	// any is, and a retry budget does not count it. It ends: only a re-used
	// or idle-watched connection can be found dead, and a new one is dialed
	// for a waiter and granted to it directly.
	LeaseAgain
)

// maxStreamRetries bounds the replays of a request whose HTTP/2 streams are
// refused (GOAWAY, REFUSED_STREAM) one connection after another.
const maxStreamRetries = 3

// Replay decides whether the attempt numbered attempt (0 = the first; a
// LeaseAgain is no attempt), which failed with err, may be sent again, and
// returns the request to send: as it is, on another lease, after the leased
// HTTP/1.1 connection was found dead before anything was written (LeaseAgain);
// once, on a fresh connection, after a re-used HTTP/1.1 connection failed
// before any response byte (see replayable); up to maxStreamRetries times, on
// another connection, after an HTTP/2 stream was refused before the server
// processed it, whatever the method, if its body can be sent again.
func (x *Exchange) Replay(req *http.Request, err error, attempt int) (*http.Request, Replay) {
	if x.got.H2 == nil {
		if foundDead(req, err) {
			return req, LeaseAgain
		}
		if attempt == 0 && x.got.Reused {
			if next, ok := replayable(req, err); ok {
				return next, ReplayStale
			}
		}
		return nil, NoReplay
	}
	if attempt >= maxStreamRetries || !errors.Is(err, h2.ErrRefused) && !errors.Is(err, h2.ErrNoStream) {
		return nil, NoReplay
	}
	if next, ok := rewound(req); ok {
		return next, ReplayRefused
	}
	return nil, NoReplay
}

// foundDead reports whether err says that the leased connection was found
// closed by the server before any byte of req was written to it
// (conn.ErrStaleConn, nothing written): req, its body untouched, may go out
// on another connection, unless its context has ended.
func foundDead(req *http.Request, err error) bool {
	var ee *conn.ExchangeError
	return errors.As(err, &ee) && !ee.Written && !ee.GotByte && errors.Is(err, conn.ErrStaleConn) &&
		req.Context().Err() == nil
}

// replayable decides whether a request that failed on a re-used connection may
// be sent again on a new one, and returns the request to send. It is the one
// retry RoundTrip makes (golang/go#22158 and #19943 are net/http users hitting
// the stale-connection race; square/okhttp#8472 is a client replaying POSTs it
// should not):
//
//   - a response that had started (any byte read) is never replayed;
//   - otherwise the request must be idempotent (RFC 9110 section 9.2.2, or an
//     Idempotency-Key header) if anything was written, and its body must be
//     replayable: none, or GetBody.
//
// A connection found dead before anything was written is not replayed but
// leased again (foundDead, LeaseAgain). A request whose context has ended is
// not replayed.
func replayable(req *http.Request, err error) (*http.Request, bool) {
	var ee *conn.ExchangeError
	if !errors.As(err, &ee) || ee.GotByte || req.Context().Err() != nil {
		return nil, false
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
