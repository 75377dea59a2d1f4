package actors

import (
	"context"
	"errors"
	"net/http"

	"github.com/connactor/connactor/conn"
)

// What an exchange's end says of its server, for the outlier rule
// (route_outlier.go): the caller's side, which saw the response head or
// the error, decides, and says so in its Released (ExchangeFailed). The
// route only counts.

// headFailed reports whether a response head says its server failed the
// exchange: a 5xx status.
func headFailed(resp *http.Response) bool { return resp.StatusCode >= http.StatusInternalServerError }

// bodyFailed reports whether err, the error that ended an HTTP/2 response
// body after a good head, says its server failed the exchange: a reset, a
// lost connection. nil (read to its end, or closed by its holder) and the
// caller's context (a cancel, a deadline, a hedged attempt that lost) do
// not count. HTTP/1.1 bodies tell the same apart in package conn
// (conn.Ender's failure).
func bodyFailed(err error) bool {
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// exchangeFailed reports whether err, the error of an exchange after its
// lease, says its server failed it: the request may have reached the server
// and no response head came back (ErrOutcomeUnknown: a reset, a close, a
// malformed head), or the head did not come in time (a response-header
// timeout). Errors that say nothing of the server do not count: nothing was
// sent (ErrNotSent: a stale connection, a refused HTTP/2 stream, which are
// replayed), the caller gave up (its context: a cancel, a deadline, a hedged
// attempt that lost), the request's own body failed, or the connection
// actor failed.
func exchangeFailed(err error) bool {
	var body *conn.RequestBodyError
	switch {
	case errors.Is(err, conn.ErrResponseHeaderTimeout):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &body), errors.Is(err, conn.ErrConnActorFailed):
		return false
	}
	return errors.Is(err, conn.ErrOutcomeUnknown)
}
