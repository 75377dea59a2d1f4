package actors

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/conn/h2"
)

// Exchange.Replay's rules, one case a row: an HTTP/1.1 connection found dead
// before anything was written is leased again, as often as that happens and
// whatever the method, with the request as it is; an HTTP/1.1 attempt is
// replayed once, after a re-used connection failed before any response byte, when the
// server cannot have acted on it or it is idempotent, and its body can be
// had again; an HTTP/2 attempt whose stream was refused unprocessed is
// replayed up to three times, whatever its method.
func TestAFailedAttemptIsReplayedOnlyWhenThatIsSafe(t *testing.T) {
	stale := &conn.ExchangeError{Op: "write", Reused: true, Err: conn.ErrStaleConn}
	written := &conn.ExchangeError{Op: "read", Written: true, Reused: true, Err: io.EOF}
	started := &conn.ExchangeError{Op: "read", Written: true, GotByte: true, Reused: true, Err: io.ErrUnexpectedEOF}
	refused := &h2.RoundTripError{Err: h2.ErrRefused}
	noStream := &h2.RoundTripError{Err: h2.ErrNoStream}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name    string
		h2      bool
		reused  bool
		attempt int
		method  string
		body    string // "" = none
		getBody bool
		header  string // a header the request carries
		ctx     context.Context
		err     error
		want    Replay
	}{
		{name: "stale before writing, even a POST", reused: true, method: "POST", body: "x", err: stale, want: LeaseAgain},
		{name: "stale before writing, the third time", reused: true, attempt: 2, method: "GET", err: stale, want: LeaseAgain},
		{name: "stale before writing, a new connection the idle watch found closed", method: "GET", err: stale, want: LeaseAgain},
		{name: "stale before writing, its context ended", reused: true, method: "GET", ctx: cancelled, err: stale, want: NoReplay},
		{name: "written GET", reused: true, method: "GET", err: written, want: ReplayStale},
		{name: "written POST", reused: true, method: "POST", body: "x", getBody: true, err: written, want: NoReplay},
		{name: "written POST with an Idempotency-Key", reused: true, method: "POST", body: "x", getBody: true,
			header: "Idempotency-Key", err: written, want: ReplayStale},
		{name: "written PUT whose body cannot be had again", reused: true, method: "PUT", body: "x", err: written, want: NoReplay},
		{name: "a response had started", reused: true, method: "GET", err: started, want: NoReplay},
		{name: "on a new connection", method: "GET", err: written, want: NoReplay},
		{name: "the second attempt", reused: true, attempt: 1, method: "GET", err: written, want: NoReplay},
		{name: "its context ended", reused: true, method: "GET", ctx: cancelled, err: written, want: NoReplay},
		{name: "not an exchange's error", reused: true, method: "GET", err: errors.New("other"), want: NoReplay},
		{name: "refused stream, a POST", h2: true, method: "POST", body: "x", getBody: true, err: refused, want: ReplayRefused},
		{name: "no stream", h2: true, method: "GET", err: noStream, want: ReplayRefused},
		{name: "refused the third time", h2: true, attempt: 2, method: "GET", err: refused, want: ReplayRefused},
		{name: "refused the fourth time", h2: true, attempt: 3, method: "GET", err: refused, want: NoReplay},
		{name: "refused, a body that cannot be had again", h2: true, method: "POST", body: "x", err: refused, want: NoReplay},
		{name: "another stream error", h2: true, method: "GET", err: &h2.RoundTripError{Err: io.EOF}, want: NoReplay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, err := http.NewRequestWithContext(ctx, tc.method, "http://a.test/", body)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.getBody {
				req.GetBody = nil
			}
			if tc.header != "" {
				req.Header.Set(tc.header, "k")
			}
			x := &Exchange{got: Lease{Reused: tc.reused}}
			if tc.h2 {
				x.got.H2 = &h2.Conn{}
			}
			next, got := x.Replay(req, tc.err, tc.attempt)
			if got != tc.want {
				t.Fatalf("Replay: %v, want %v", got, tc.want)
			}
			if got == LeaseAgain && next != req {
				t.Fatalf("the request to lease again: %p, want the original %p (nothing of it was written)", next, req)
			}
			if got != NoReplay && (next == nil || tc.body != "" && tc.err != stale && next == req) {
				t.Fatalf("the request to replay: %v (the original %p, a body from GetBody wanted)", next, req)
			}
		})
	}
}
