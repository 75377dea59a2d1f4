package faults_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/connactor/connactor/client"
	fs "github.com/connactor/connactor/internal/testkit/faultserver"
)

// fixture is what a case runs against: a fresh one per client.
type fixture struct {
	srv     *fs.Server // nil: no server (DNS)
	base    string     // URL the requests go to
	opts    clientOpts
	between func(t *testing.T) // runs between the bad and the good request
	// connOf says which connection the request named id first arrived on
	// (nil: srv's ConnOf), for a server that is not srv's own loop.
	connOf func(id string) (int, bool)
}

// expect is what connactor must do with a case's bad request. Whatever it
// does, a RoundTrip error must be typed (ErrNotSent or ErrOutcomeUnknown), the
// good request after it must get its own response, and it must arrive on a new
// connection unless the bad exchange ended well and keepConn allows re-use, or
// reuseOK allows it anyway.
type expect struct {
	status   int     // a correct response with this status is right (0: a response is wrong)
	errIs    []error // an error is right if it matches all of these (nil: an error is wrong)
	errAs    func(error) bool
	bodyErr  bool // a response whose body fails to read is right
	keepConn bool // after a correct response, the connection may be re-used
	// reuseOK lets the connection carry the next request whatever the bad
	// one got: an HTTP/2 fault confined to one stream (a reset, a stream's
	// protocol error) leaves the connection and its other streams sound.
	reuseOK bool
	noGood  bool // no good request after the bad one (the server cannot answer it)
}

// faultCase is one row of the matrix.
type faultCase struct {
	name  string
	risk  string // the failure it reproduces, named in the report ("": none)
	setup func(t *testing.T) *fixture
	// run replaces the default bad-then-good run; it returns its own problems.
	run  func(t *testing.T, f *fixture, tg *target) outcome
	want expect
}

// outcome is what a run saw.
type outcome struct {
	bad, good result
	hasGood   bool
	reused    bool     // the good request arrived on the bad one's connection
	summary   string   // a custom run's description
	problems  []string // a custom run's findings against connactor's expectations
}

// script serves /good well and hands every other request to bad.
func script(bad fs.Handler) fs.Handler {
	return func(c *fs.Conn, r *fs.Request) {
		if r.URL.Path == "/good" {
			c.Write(fs.OK(r.ID))
			return
		}
		bad(c, r)
	}
}

// serve starts a scripted server for a case; cleanup closes it.
func serve(t *testing.T, cfg fs.Config) *fixture {
	t.Helper()
	s, err := fs.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &fixture{srv: s, base: s.URL()}
}

// bad is a fixture whose /bad answers with the raw bytes of respond(id).
func bad(respond func(id string) string) func(t *testing.T) *fixture {
	return func(t *testing.T) *fixture {
		return serve(t, fs.Config{Handler: script(func(c *fs.Conn, r *fs.Request) { c.Write(respond(r.ID)) })})
	}
}

// badThenClose is bad, then the server closes the connection (FIN).
func badThenClose(respond func(id string) string) func(t *testing.T) *fixture {
	return func(t *testing.T) *fixture {
		return serve(t, fs.Config{Handler: script(func(c *fs.Conn, r *fs.Request) {
			c.Write(respond(r.ID))
			c.Close()
		})})
	}
}

// outcomeUnknown is the expectation of a malformed head: a typed error, the
// connection discarded.
var outcomeUnknown = expect{errIs: []error{client.ErrOutcomeUnknown}}

// withBody is a 200 head with the given framing lines, then raw body bytes.
func withBody(body string, headers ...string) string {
	return fs.Head("HTTP/1.1 200 OK", headers...) + body
}

func framingCases() []faultCase {
	return []faultCase{
		{name: "extra bytes after a body (longer than its Content-Length)", risk: "desync",
			setup: bad(func(id string) string { return fs.OK(id) + fs.OK("bogus") }),
			want:  expect{status: 200}},
		{name: "extra bytes after a body-less 204", risk: "desync",
			setup: bad(func(id string) string { return fs.Head("HTTP/1.1 204 No Content") + fs.OK("bogus") }),
			want:  expect{status: 204}},
		{name: "Content-Length with Transfer-Encoding: chunked", risk: "smuggling",
			setup: bad(func(id string) string {
				return withBody(fs.Chunk(fs.Body(id))+"0\r\n\r\n", "Content-Length: 50", "Transfer-Encoding: chunked")
			}),
			want: expect{status: 200, errIs: []error{client.ErrOutcomeUnknown}}},
		{name: "conflicting Content-Length", setup: bad(func(id string) string {
			return withBody(fs.Body(id), "Content-Length: 3", fs.ContentLength(fs.Body(id)))
		}), want: outcomeUnknown},
		{name: "negative Content-Length", setup: bad(func(id string) string {
			return withBody(fs.Body(id), "Content-Length: -"+fmt.Sprint(len(fs.Body(id))))
		}), want: outcomeUnknown},
		{name: "chunk size overflowing 64 bits", setup: bad(func(id string) string {
			return withBody("fffffffffffffffff1\r\n"+fs.Body(id)+"\r\n0\r\n\r\n", "Transfer-Encoding: chunked")
		}), want: expect{bodyErr: true}},
		{name: "malformed chunk extension", setup: bad(func(id string) string {
			b := fs.Body(id)
			return withBody(fmt.Sprintf("%x ; bad ext \x01 \"open\r\n%s\r\n0\r\n\r\n", len(b), b), "Transfer-Encoding: chunked")
		}), want: expect{status: 200, bodyErr: true, keepConn: true}},
		{name: "obs-fold header continuation", setup: bad(func(id string) string {
			return withBody(fs.Body(id), "X-Folded: first", "  continued", fs.ContentLength(fs.Body(id)))
		}), want: expect{status: 200, errIs: []error{client.ErrOutcomeUnknown}, keepConn: true}},
		{name: "NUL byte in a header value", setup: bad(func(id string) string {
			return withBody(fs.Body(id), "X-Nul: a\x00b", fs.ContentLength(fs.Body(id)))
		}), want: outcomeUnknown},
		{name: "bare LF line endings", setup: bad(func(id string) string {
			return "HTTP/1.1 200 OK\nContent-Length: " + fmt.Sprint(len(fs.Body(id))) + "\n\n" + fs.Body(id)
		}), want: expect{status: 200, errIs: []error{client.ErrOutcomeUnknown}, keepConn: true}},
		{name: "HTTP/0.9 response (no status line)",
			setup: badThenClose(func(id string) string { return fs.Body(id) + "\n" }),
			want:  outcomeUnknown},
		{name: "status 999", setup: bad(func(id string) string {
			return fs.Head("HTTP/1.1 999 Odd", fs.ContentLength(fs.Body(id))) + fs.Body(id)
		}), want: expect{status: 999, errIs: []error{client.ErrOutcomeUnknown}, keepConn: true}},
		{name: "status 0", setup: bad(func(id string) string {
			return fs.Head("HTTP/1.1 0 Zero", fs.ContentLength(fs.Body(id))) + fs.Body(id)
		}), want: outcomeUnknown},
		{name: "status 000", setup: bad(func(id string) string {
			return fs.Head("HTTP/1.1 000 Zero", fs.ContentLength(fs.Body(id))) + fs.Body(id)
		}), want: outcomeUnknown},
		{name: "status 1000", setup: bad(func(id string) string {
			return fs.Head("HTTP/1.1 1000 Big", fs.ContentLength(fs.Body(id))) + fs.Body(id)
		}), want: outcomeUnknown},
		{name: "20 x 103 Early Hints, then 200", setup: bad(func(id string) string {
			return strings.Repeat(fs.Head("HTTP/1.1 103 Early Hints", "Link: </style.css>; rel=preload"), 20) + fs.OK(id)
		}), want: expect{status: 200, errIs: []error{client.ErrOutcomeUnknown}, keepConn: true}},
		{name: "endless flood of 1xx responses", setup: func(t *testing.T) *fixture {
			return serve(t, fs.Config{Handler: script(func(c *fs.Conn, r *fs.Request) {
				hint := fs.Head("HTTP/1.1 103 Early Hints", "Link: </style.css>; rel=preload")
				for c.Write(strings.Repeat(hint, 64)) == nil { // until the client gives up
				}
			})})
		}, want: expect{errIs: []error{client.ErrOutcomeUnknown, client.ErrResponseHeaderTooLarge}}},
		{name: "unsolicited response on an idle connection", risk: "desync", setup: unsolicited,
			want: expect{status: 200}},
	}
}

// unsolicited answers /bad, and once the client has read that answer (between
// runs), sends a response nobody asked for on the now idle connection.
func unsolicited(t *testing.T) *fixture {
	proceed, written := make(chan struct{}), make(chan struct{})
	f := serve(t, fs.Config{Handler: script(func(c *fs.Conn, r *fs.Request) {
		c.Write(fs.OK(r.ID))
		if c.Await(proceed) == nil {
			c.Write(fs.OK("bogus"))
			close(written)
		}
	})})
	f.between = func(t *testing.T) {
		close(proceed)
		select {
		case <-written:
		case <-time.After(settleWait):
			t.Error("the server never sent its unsolicited response")
		}
	}
	return f
}

func slowAndBrokenCases() []faultCase {
	slowloris := func(t *testing.T) *fixture {
		return serve(t, fs.Config{Handler: script(func(c *fs.Conn, r *fs.Request) {
			c.WriteSlowly(fs.OK(r.ID), 200*time.Millisecond) // about 12 s for the whole answer
		})})
	}
	return []faultCase{
		{name: "slowloris head, ResponseHeaderTimeout 1s", risk: "slow head",
			setup: func(t *testing.T) *fixture {
				f := slowloris(t)
				f.opts.responseHeaderTimeout = time.Second
				return f
			},
			want: expect{errIs: []error{client.ErrOutcomeUnknown, client.ErrResponseHeaderTimeout}}},
		{name: "slowloris head, request deadline 1s", setup: slowloris, run: deadlineThenGood,
			want: expect{errIs: []error{client.ErrOutcomeUnknown, context.DeadlineExceeded}}},
		{name: "server answers 413 without reading a 16 MiB body, then closes",
			setup: func(t *testing.T) *fixture {
				return serve(t, fs.Config{KeepBodyUnread: true, Handler: script(func(c *fs.Conn, r *fs.Request) {
					c.Write(fs.Head("HTTP/1.1 413 Payload Too Large", "Connection: close",
						fs.ContentLength(fs.Body(r.ID))) + fs.Body(r.ID))
					c.Close() // with the body unread: the kernel resets the connection
				})})
			}, run: bigPostThenGood,
			want: expect{status: 413, errIs: []error{client.ErrOutcomeUnknown}}},
		{name: "server never reads a 16 MiB body nor answers, request deadline 1s",
			setup: func(t *testing.T) *fixture {
				never := make(chan struct{})
				return serve(t, fs.Config{KeepBodyUnread: true, Handler: script(func(c *fs.Conn, r *fs.Request) {
					c.Await(never) // until the server closes
				})})
			}, run: bigPostThenGood,
			want: expect{errIs: []error{client.ErrOutcomeUnknown, context.DeadlineExceeded}}},
		{name: "RST in the middle of a body", setup: func(t *testing.T) *fixture {
			return serve(t, fs.Config{Handler: script(func(c *fs.Conn, r *fs.Request) {
				c.Write(fs.Head("HTTP/1.1 200 OK", "Content-Length: 1000") + fs.Body(r.ID))
				c.Reset()
			})})
		}, want: expect{bodyErr: true}},
		{name: "truncated chunked body (FIN, no last chunk)",
			setup: badThenClose(func(id string) string {
				return withBody(fs.Chunk(fs.Body(id)), "Transfer-Encoding: chunked")
			}), want: expect{bodyErr: true}},
		{name: "truncated Content-Length body (FIN)",
			setup: badThenClose(func(id string) string { return withBody(fs.Body(id), "Content-Length: 1000") }),
			want:  expect{bodyErr: true}},
		{name: "server closes after every response, no Connection: close (50 POSTs)", risk: "silent close",
			setup: func(t *testing.T) *fixture {
				return serve(t, fs.Config{Handler: func(c *fs.Conn, r *fs.Request) { c.WriteAndClose(fs.OK(r.ID)) }})
			}, run: closingServerPOSTs},
	}
}

func tlsAndDNSCases() []faultCase {
	tlsServer := func(cert func() (*fs.Cert, error)) func(t *testing.T) *fixture {
		return func(t *testing.T) *fixture {
			c, err := cert()
			if err != nil {
				t.Fatal(err)
			}
			f := serve(t, fs.Config{TLS: c.ServerConfig(), Handler: script(func(c *fs.Conn, r *fs.Request) { c.Write(fs.OK(r.ID)) })})
			f.opts.roots = c.Pool
			return f
		}
	}
	return []faultCase{
		{name: "TLS, valid certificate (control)", setup: tlsServer(fs.LoopbackCert),
			want: expect{status: 200, keepConn: true}},
		{name: "TLS, expired certificate", setup: tlsServer(fs.ExpiredCert),
			want: expect{noGood: true, errAs: func(err error) bool {
				var e x509.CertificateInvalidError
				return nothingSent(err) && errors.As(err, &e) && e.Reason == x509.Expired
			}}},
		{name: "TLS, certificate for another host", setup: tlsServer(fs.WrongHostCert),
			want: expect{noGood: true, errAs: func(err error) bool {
				var e x509.HostnameError
				return nothingSent(err) && errors.As(err, &e)
			}}},
		{name: "TLS handshake stalls (accepts, never answers), TLSHandshakeTimeout 1s",
			setup: func(t *testing.T) *fixture {
				f := serve(t, fs.Config{Raw: func(c *fs.Conn) { c.Hold() }})
				f.base = "https://" + f.srv.Addr()
				f.opts.tlsHandshakeTimeout = time.Second
				return f
			},
			want: expect{noGood: true, errIs: []error{client.ErrNotSent}, errAs: func(err error) bool {
				var ne net.Error
				return errors.As(err, &ne) && ne.Timeout()
			}}},
		{name: "DNS failure (.invalid, answered in-process)",
			setup: func(t *testing.T) *fixture { return &fixture{base: "http://nothing-here.invalid"} },
			want: expect{noGood: true, errIs: []error{client.ErrNotSent}, errAs: func(err error) bool {
				var e *net.DNSError
				return errors.As(err, &e) && e.IsNotFound
			}}},
	}
}
