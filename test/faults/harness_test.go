package faults_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/connactor/connactor/client"
	"github.com/connactor/connactor/internal/testkit/errname"
	fs "github.com/connactor/connactor/internal/testkit/faultserver"
)

// The two clients of every case: connactor, whose expectations the test
// asserts, and net/http's Transport, whose results are recorded beside them.
const (
	kindConnactor = "connactor"
	kindNetHTTP   = "net/http"
)

var kinds = []string{kindConnactor, kindNetHTTP}

// settleWait bounds every wait for a client to come to rest: reached only when
// it never does.
const settleWait = 30 * time.Second

// requestWait bounds each request of a case that sets no deadline of its own,
// so that a hanging client fails its case instead of the whole run.
const requestWait = 30 * time.Second

// clientOpts are the few settings a case changes; both clients get the same.
type clientOpts struct {
	responseHeaderTimeout time.Duration
	tlsHandshakeTimeout   time.Duration
	roots                 *x509.CertPool // trusted roots for https cases
	// h2 has net/http attempt HTTP/2 as connactor does by default (ALPN h2
	// and http/1.1 on https routes); http2 is both clients' HTTP/2 tuning.
	h2    bool
	http2 *http.HTTP2Config
	// maxHeaderBytes bounds a response head (0: the default of both,
	// client.DefaultMaxResponseHeaderBytes).
	maxHeaderBytes int64
}

// target is one client under test, with its own counting dialer: the dialer's
// open sockets are the client's sockets.
type target struct {
	kind   string
	rt     http.RoundTripper
	dialer *fs.Dialer
	c      *client.Client  // connactor only
	tr     *http.Transport // net/http only
}

func newTarget(t *testing.T, kind string, o clientOpts) *target {
	t.Helper()
	tg := &target{kind: kind, dialer: fs.NewDialer()}
	var tlsConf *tls.Config
	if o.roots != nil {
		tlsConf = &tls.Config{RootCAs: o.roots}
	}
	switch kind {
	case kindConnactor:
		c, err := client.New(client.Config{
			MaxConnsPerRoute:       4,
			MaxConnsTotal:          8,
			DialContext:            tg.dialer.DialContext,
			TLSConfig:              tlsConf,
			ResponseHeaderTimeout:  o.responseHeaderTimeout,
			TLSHandshakeTimeout:    o.tlsHandshakeTimeout,
			HTTP2:                  o.http2,
			MaxResponseHeaderBytes: o.maxHeaderBytes,
			Logger:                 slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		tg.c, tg.rt = c, c
		t.Cleanup(func() { c.Close() })
	case kindNetHTTP:
		tg.tr = &http.Transport{
			DialContext:            tg.dialer.DialContext,
			TLSClientConfig:        tlsConf,
			ResponseHeaderTimeout:  o.responseHeaderTimeout,
			TLSHandshakeTimeout:    o.tlsHandshakeTimeout,
			MaxConnsPerHost:        4,
			MaxResponseHeaderBytes: client.DefaultMaxResponseHeaderBytes,
			DisableCompression:     true,
		}
		if tg.tr.TLSHandshakeTimeout == 0 {
			tg.tr.TLSHandshakeTimeout = client.DefaultTLSHandshakeTimeout
		}
		if o.maxHeaderBytes > 0 {
			tg.tr.MaxResponseHeaderBytes = o.maxHeaderBytes
		}
		if o.h2 {
			// A custom DialContext turns HTTP/2 off unless forced.
			tg.tr.ForceAttemptHTTP2 = true
			tg.tr.Protocols = new(http.Protocols)
			tg.tr.Protocols.SetHTTP1(true)
			tg.tr.Protocols.SetHTTP2(true)
			tg.tr.HTTP2 = o.http2
		}
		tg.rt = tg.tr
		t.Cleanup(tg.tr.CloseIdleConnections)
	}
	return tg
}

// result is what one request got.
type result struct {
	id      string
	status  int
	header  http.Header
	body    string
	err     error // RoundTrip's
	bodyErr error // reading the body's
}

// correct reports whether r is a complete response with status whose body
// names r's request (or is empty, for the body-less 204 and 304).
func (r result) correct(status int) bool {
	want := fs.Body(r.id)
	if status == http.StatusNoContent || status == http.StatusNotModified {
		want = ""
	}
	return r.err == nil && r.bodyErr == nil && r.status == status && r.body == want
}

// do sends a request for id and reads its whole body. body nil sends none;
// replayable false hides GetBody, as a body read from a stream would be.
func (tg *target) do(ctx context.Context, method, url, id string, body string, replayable bool) result {
	r := result{id: id}
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		r.err = err
		return r
	}
	if body != "" {
		req.ContentLength = int64(len(body))
		req.Body = io.NopCloser(strings.NewReader(body))
		if replayable {
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
		}
	}
	resp, err := tg.rt.RoundTrip(req)
	if err != nil {
		r.err = err
		return r
	}
	r.status, r.header = resp.StatusCode, resp.Header
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.body, r.bodyErr = string(b), err
	return r
}

// get sends GET base+path?id=id within requestWait.
func (tg *target) get(base, path, id string) result {
	ctx, cancel := context.WithTimeout(context.Background(), requestWait)
	defer cancel()
	return tg.do(ctx, http.MethodGet, base+path+"?id="+id, id, "", false)
}

// settle waits until connactor is at rest (nothing leased or pending, and as
// many open sockets as idle connections) and returns what it found, at rest or
// when settleWait ran out. For net/http it returns the open sockets as they are.
func (tg *target) settle() (fs.Rest, bool) {
	if tg.c == nil {
		return fs.Rest{Sockets: tg.dialer.Counts().Open}, true
	}
	return fs.Settle(func() (int, int, int) { st := tg.c.Stats(); return st.Leased, st.Pending, st.Idle }, tg.dialer, settleWait)
}

// certErrorName names the certificate exception beside the sentinels (internal/testkit/errname).
const certErrorName = "*tls.CertificateVerificationError"

// typed reports whether err carries one of the two families every connactor
// transport error belongs to (client/errors.go), or is one of the documented
// exceptions: ErrClosed, and a certificate that does not verify.
func typed(err error) bool {
	return errors.Is(err, client.ErrNotSent) || errors.Is(err, client.ErrOutcomeUnknown) ||
		errors.Is(err, client.ErrClosed) || isCertError(err)
}

// isCertError reports whether err is a server certificate that did not verify.
// client/errors.go returns it as the *tls.CertificateVerificationError itself,
// as net/http does (nothing was sent), so that code type-switching on
// url.Error.Err sees it; earlier versions wrapped it with ErrNotSent. Either
// says nothing was sent.
func isCertError(err error) bool {
	var cv *tls.CertificateVerificationError
	return errors.As(err, &cv)
}

// nothingSent reports whether err says the request never reached the server.
func nothingSent(err error) bool { return errors.Is(err, client.ErrNotSent) || isCertError(err) }

// describeErr names err's sentinels, then its message, shortened.
func describeErr(err error) string {
	var names []string
	if n := errname.Of(err); n != "" {
		names = append(names, n)
	}
	if isCertError(err) {
		names = append(names, certErrorName)
	}
	msg := short(err.Error(), 70)
	if len(names) == 0 {
		return "error: " + msg
	}
	return strings.Join(names, "+") + ": " + msg
}

// describe is a result in a table cell.
func describe(r result) string {
	switch {
	case r.err != nil:
		return describeErr(r.err)
	case r.bodyErr != nil:
		return fmt.Sprintf("%d, body error: %s", r.status, short(r.bodyErr.Error(), 60))
	default:
		return fmt.Sprintf("%d %q", r.status, short(r.body, 40))
	}
}

func short(s string, n int) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
