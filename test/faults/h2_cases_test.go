package faults_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/connactor/connactor/client"
	fs "github.com/connactor/connactor/internal/testkit/faultserver"
	"github.com/connactor/connactor/internal/testkit/h2server"
)

// h2Case is one row of the HTTP/2 matrix.
type h2Case struct {
	name  string
	risk  string // the failure it reproduces, named in the report ("": none)
	setup func(t *testing.T) *h2fixture
	// run replaces the default bad-then-good run; it returns its own problems.
	run  func(t *testing.T, f *h2fixture, tg *target) outcome
	want expect
}

type h2Group struct {
	name  string
	cases []h2Case
}

func h2Groups() []h2Group {
	return []h2Group{
		{"control", []h2Case{{name: "well-behaved HTTP/2 server",
			setup: func(t *testing.T) *h2fixture {
				return h2serve(t, everyConn(func(_ *h2fixture, c *h2server.Conn, r *h2server.Request) { c.OK(r) }))
			},
			want: expect{status: 200, keepConn: true}}}},
		{"GOAWAY", goAwayCases()},
		{"RST_STREAM", resetCases()},
		{"limits and health", limitCases()},
		{"protocol errors", protocolCases()},
		{"not HTTP/2", notH2Cases()},
	}
}

func goAwayCases() []h2Case {
	return []h2Case{
		{name: "last stream id below streams in flight (3 streams, it names the 2nd)", risk: "lost request",
			setup: func(t *testing.T) *h2fixture {
				return h2serve(t, firstConn(func(f *h2fixture) h2server.Script {
					return h2server.Script{Run: func(c *h2server.Conn) {
						rs, ok := take(c, 3)
						if !ok {
							return
						}
						c.GoAway(rs[1].Stream, http2.ErrCodeNo, "")
						c.OK(rs[0])
						c.OK(rs[1])
						refuseAll(f, c, "GOAWAY")
					}}
				}))
			},
			run: func(t *testing.T, f *h2fixture, tg *target) outcome {
				j := newJudge(f, tg)
				res := inFlight(t, f, tg, "b1", "b2", "b3")
				j.ok(res["b1"])
				j.ok(res["b2"])
				j.ok(res["b3"])
				j.stayed("b1", 0)
				j.stayed("b2", 0)
				j.replayed("b3", 0)
				j.good(tg, 0)
				return j.outcome()
			}},
		{name: "naming no stream, then close, a request in flight", risk: "lost request",
			setup: goAwayAfter(1, http2.ErrCodeNo, nil), run: replayedThenGood},
		{name: "naming the stream in flight, then close", risk: "hang",
			setup: goAwayAfter(1, http2.ErrCodeNo, first),
			run: func(t *testing.T, f *h2fixture, tg *target) outcome {
				j := newJudge(f, tg)
				j.failed(tg.get(f.base, "/bad", "b1"), client.ErrOutcomeUnknown)
				j.stayed("b1", 0)
				j.good(tg, 0)
				return j.outcome()
			}},
		{name: "INTERNAL_ERROR naming the 1st of 2 streams in flight, then close", risk: "lost request",
			setup: goAwayAfter(2, http2.ErrCodeInternal, first),
			run: func(t *testing.T, f *h2fixture, tg *target) outcome {
				j := newJudge(f, tg)
				res := inFlight(t, f, tg, "b1", "b2")
				j.failed(res["b1"], client.ErrOutcomeUnknown)
				j.ok(res["b2"])
				j.stayed("b1", 0)
				j.replayed("b2", 0)
				j.good(tg, 0)
				return j.outcome()
			}},
		{name: "ENHANCE_YOUR_CALM naming no stream, on a connection's first stream, then close",
			setup: goAwayAfter(1, http2.ErrCodeEnhanceYourCalm, nil), run: replayedThenGood},
	}
}

// goAwayAfter is a server whose first connection takes n requests, sends
// GOAWAY with code naming the stream last picks (nil: none, 0), and closes.
func goAwayAfter(n int, code http2.ErrCode, last func([]*h2server.Request) uint32) func(t *testing.T) *h2fixture {
	return func(t *testing.T) *h2fixture {
		return h2serve(t, firstConn(func(f *h2fixture) h2server.Script {
			return h2server.Script{Run: func(c *h2server.Conn) {
				rs, ok := take(c, n)
				if !ok {
					return
				}
				id := uint32(0)
				if last != nil {
					id = last(rs)
				}
				c.GoAway(id, code, "going away")
				c.Close()
			}}
		}))
	}
}

// first picks the first request's stream.
func first(rs []*h2server.Request) uint32 { return rs[0].Stream }

// replayedThenGood requires GET /bad named b1 to succeed once sent again
// elsewhere after the first connection refused it, then a good request on a
// connection other than the first.
func replayedThenGood(t *testing.T, f *h2fixture, tg *target) outcome {
	j := newJudge(f, tg)
	j.ok(tg.get(f.base, "/bad", "b1"))
	j.replayed("b1", 0)
	j.good(tg, 0)
	return j.outcome()
}

// resetCases are RST_STREAM with each code, before the response (on a new
// stream) and in the middle of its body (on a stream in flight). A reset ends
// one stream: the connection stays usable.
func resetCases() []h2Case {
	var cases []h2Case
	for _, code := range []http2.ErrCode{http2.ErrCodeRefusedStream, http2.ErrCodeCancel, http2.ErrCodeInternal} {
		onNew := expect{errIs: []error{client.ErrOutcomeUnknown}, reuseOK: true}
		if code == http2.ErrCodeRefusedStream {
			onNew = expect{status: 200, keepConn: true, reuseOK: true} // refused unprocessed: sent again
		}
		cases = append(cases,
			h2Case{name: code.String() + " on a new stream",
				setup: func(t *testing.T) *h2fixture {
					var done atomic.Bool
					return h2serve(t, everyConn(func(_ *h2fixture, c *h2server.Conn, r *h2server.Request) {
						if done.CompareAndSwap(false, true) { // the first time only
							c.ResetStream(r.Stream, code)
							return
						}
						c.OK(r)
					}))
				}, want: onNew},
			h2Case{name: code.String() + " on a stream in flight (body half sent)",
				setup: func(t *testing.T) *h2fixture {
					return h2serve(t, everyConn(func(_ *h2fixture, c *h2server.Conn, r *h2server.Request) {
						c.Headers(r.Stream, 200, false, hpack.HeaderField{Name: "content-length", Value: "1000"})
						c.Data(r.Stream, fs.Body(r.ID), false)
						c.ResetStream(r.Stream, code)
					}))
				}, want: expect{bodyErr: true, reuseOK: true}})
	}
	return cases
}

var (
	maxStreams = func(n uint32) http2.Setting { return http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: n} }
	// pings is both clients' health check for the PING case: a PING after
	// 500ms without a frame, the connection closed when its ack takes 500ms.
	pings = &http.HTTP2Config{SendPingTimeout: 500 * time.Millisecond, PingTimeout: 500 * time.Millisecond}
)

func limitCases() []h2Case {
	return []h2Case{
		{name: "MAX_CONCURRENT_STREAMS lowered to 0 on the only connection, idle; then a request", risk: "hang",
			setup: func(t *testing.T) *h2fixture {
				lowered := make(chan struct{})
				f := h2serve(t, firstConn(func(f *h2fixture) h2server.Script {
					return h2server.Script{Run: func(c *h2server.Conn) {
						// Sync: the client has handled every frame, the
						// connection is idle, when the limit drops.
						if r, ok := c.Next(); ok && c.OK(r) == nil && c.Sync() && c.Settings(maxStreams(0)) {
							close(lowered)
							refuseAll(f, c, "MAX_CONCURRENT_STREAMS 0")
						}
					}}
				}))
				f.between = awaiting(lowered, "the server never lowered its limit")
				return f
			},
			run: func(t *testing.T, f *h2fixture, tg *target) outcome {
				j := newJudge(f, tg)
				j.ok(tg.get(f.base, "/bad", "b1"))
				f.between(t)
				j.good(tg, 0)
				return j.outcome()
			}},
		{name: "MAX_CONCURRENT_STREAMS lowered to 1, then to 0, while 2 streams run", risk: "hang", setup: loweredWhileRunning,
			run: func(t *testing.T, f *h2fixture, tg *target) outcome {
				j := newJudge(f, tg)
				running := sendInFlight(t, f, tg, "b1", "b2")
				if f.between != nil {
					f.between(t) // the limit is 1 now, with 2 streams running
				}
				b3 := tg.get(f.base, "/bad", "b3")
				f.proceed()
				res := running.wait()
				j.ok(res["b1"])
				j.ok(res["b2"])
				j.ok(b3)
				j.stayed("b1", 0)
				j.stayed("b2", 0)
				if conns := f.h2.ConnsOf("b3"); len(conns) != 1 || conns[0] == 0 {
					j.problem("b3: want it on a new connection (conn 0 allowed 1 stream and ran 2); got %s", j.landed("b3"))
				}
				j.good(tg, 0)
				return j.outcome()
			}},
		{name: "flow-control window never updated, 256 KiB POST, request deadline 1s", risk: "hang",
			setup: func(t *testing.T) *h2fixture {
				serve := everyConn(func(*h2fixture, *h2server.Conn, *h2server.Request) {}) // /bad is never answered
				return h2serve(t, func(f *h2fixture, i int) h2server.Script {
					s := serve(f, i)
					s.NoWindowUpdates = true
					return s
				})
			},
			run: func(t *testing.T, f *h2fixture, tg *target) outcome {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				o := outcome{bad: tg.do(ctx, http.MethodPost, f.base+"/bad?id=b1", "b1", strings.Repeat("x", 256<<10), true)}
				cancel()
				o.good, o.hasGood = tg.get(f.base, "/good", "g1"), true
				o.reused = onFirstConnOf(f, "g1", "b1")
				return o
			},
			// The connection's own window is spent, but a request without a
			// body needs none: the next GET may use it.
			want: expect{errIs: []error{client.ErrOutcomeUnknown, context.DeadlineExceeded}, reuseOK: true}},
		{name: "PING never acknowledged, the response never comes (PING after 500ms, PingTimeout 500ms)", risk: "hang",
			setup: func(t *testing.T) *h2fixture {
				f := h2serve(t, firstConn(func(f *h2fixture) h2server.Script {
					s := everyConn(func(*h2fixture, *h2server.Conn, *h2server.Request) {})(f, 0)
					s.IgnorePings = true
					return s
				}))
				f.opts.http2 = pings
				return f
			},
			want: expect{errIs: []error{client.ErrOutcomeUnknown}}},
		{name: "PING never acknowledged on an idle connection (PING after 500ms, PingTimeout 500ms)", risk: "stale conn",
			setup: func(t *testing.T) *h2fixture {
				f := h2serve(t, firstConn(func(f *h2fixture) h2server.Script {
					return h2server.Script{IgnorePings: true}
				}))
				f.opts.http2 = pings
				f.between = func(t *testing.T) { // the client closes the connection
					ctx, cancel := context.WithTimeout(context.Background(), settleWait)
					defer cancel()
					if err := f.h2.Wait(ctx, func(c fs.Counts) bool { return c.Closed >= 1 }); err != nil {
						t.Error("the client never closed the connection whose PINGs went unanswered")
					}
				}
				return f
			},
			want: expect{status: 200}},
	}
}

// loweredWhileRunning's first connection takes two streams, lowers its limit
// to 1 (between then lets the test send a third request, which must go on
// another connection), and once the test proceeds, answers the first stream,
// lowers its limit to 0 and answers the second.
func loweredWhileRunning(t *testing.T) *h2fixture {
	lowered, answer := make(chan struct{}), make(chan struct{})
	f := h2serve(t, firstConn(func(f *h2fixture) h2server.Script {
		return h2server.Script{Run: func(c *h2server.Conn) {
			rs, ok := take(c, 2)
			if !ok || !c.Settings(maxStreams(1)) {
				return
			}
			close(lowered)
			if c.Await(answer) != nil {
				return
			}
			c.OK(rs[0])
			if !c.Settings(maxStreams(0)) {
				return
			}
			c.OK(rs[1])
			refuseAll(f, c, "MAX_CONCURRENT_STREAMS 0")
		}}
	}))
	f.between = awaiting(lowered, "the server never lowered its limit")
	f.proceed = sync.OnceFunc(func() { close(answer) })
	t.Cleanup(f.proceed)
	return f
}

func protocolCases() []h2Case {
	return []h2Case{
		{name: "DATA after END_STREAM", risk: "desync",
			setup: func(t *testing.T) *h2fixture {
				return h2serve(t, everyConn(func(_ *h2fixture, c *h2server.Conn, r *h2server.Request) {
					c.OK(r)
					c.Data(r.Stream, fs.Body("bogus"), true)
				}))
			},
			// A stream's error: the connection is sound.
			want: expect{status: 200, keepConn: true, reuseOK: true}},
		{name: "HEADERS for the stream the client opens next (then a PING round trip)", risk: "desync",
			setup: func(t *testing.T) *h2fixture {
				sent := make(chan struct{})
				f := h2serve(t, everyConn(func(_ *h2fixture, c *h2server.Conn, r *h2server.Request) {
					c.OK(r)
					if r.ID != "b1" {
						return
					}
					c.Headers(r.Stream+2, 200, true, hpack.HeaderField{Name: "content-length", Value: "0"})
					c.Sync() // the client has read the stray HEADERS before it opens that stream
					close(sent)
				}))
				f.between = awaiting(sent, "the server never sent its stray HEADERS")
				return f
			},
			// The stray head names a stream that was not open: both clients
			// drop it (x/net ignores HEADERS for a stream it does not know),
			// HPACK decoded it, and the next request's stream gets its own
			// response.
			want: expect{status: 200, keepConn: true, reuseOK: true}},
		{name: "response head above MaxHeaderListSize (64 KiB) as a CONTINUATION flood", risk: "memory",
			setup: func(t *testing.T) *h2fixture {
				f := h2serve(t, everyConn(func(_ *h2fixture, c *h2server.Conn, r *h2server.Request) {
					c.ContinuationFlood(r.Stream, 64<<20)
				}))
				f.opts.maxHeaderBytes = 64 << 10
				return f
			},
			want: expect{errIs: []error{client.ErrOutcomeUnknown}}},
	}
}

func notH2Cases() []h2Case {
	return []h2Case{
		{name: "TLS server negotiates h2 by ALPN, then speaks HTTP/1.1",
			setup: func(t *testing.T) *h2fixture {
				return h2serve(t, firstRaw(func(c *fs.Conn, id string) {
					c.Write(fs.OK(id))
					c.Close()
				}))
			},
			want: expect{errIs: []error{client.ErrOutcomeUnknown}}},
		{name: "garbage instead of the server preface",
			setup: func(t *testing.T) *h2fixture {
				return h2serve(t, firstRaw(func(c *fs.Conn, id string) {
					c.Write(strings.Repeat("garbage!", 8))
					c.Hold()
				}))
			},
			want: expect{errIs: []error{client.ErrOutcomeUnknown}}},
		{name: "connection reset in the middle of a DATA frame", risk: "desync",
			setup: func(t *testing.T) *h2fixture {
				return h2serve(t, everyConn(func(_ *h2fixture, c *h2server.Conn, r *h2server.Request) {
					body := fs.Body(r.ID) + strings.Repeat(".", 58)
					c.Headers(r.Stream, 200, false, hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(body))})
					c.Sync() // the head is read: the reset cuts the body
					frame := h2server.Frame(func(fr *http2.Framer) error { return fr.WriteData(r.Stream, true, []byte(body)) })
					c.WriteRaw(frame[:len(frame)/2])
					c.Abort()
				}))
			},
			want: expect{bodyErr: true}},
	}
}

// firstRaw is a script whose first connection is no HTTP/2 server: once the
// client has sent its preface and its first request (whose id it decodes),
// answer takes the connection. Later connections serve every request well.
func firstRaw(answer func(c *fs.Conn, id string)) func(f *h2fixture, index int) h2server.Script {
	return func(f *h2fixture, i int) h2server.Script {
		if i > 0 {
			return h2server.Script{}
		}
		return h2server.Script{Raw: func(c *fs.Conn) {
			if id, ok := firstRequest(c.Reader()); ok {
				answer(c, id)
			}
		}}
	}
}

// firstRequest reads a client's preface and frames until its first request,
// and returns the request's id.
func firstRequest(r io.Reader) (string, bool) {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(r, preface); err != nil || !bytes.Equal(preface, []byte(http2.ClientPreface)) {
		return "", false
	}
	fr := http2.NewFramer(nil, r)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return "", false
		}
		if mh, ok := f.(*http2.MetaHeadersFrame); ok {
			_, q, _ := strings.Cut(mh.PseudoValue("path"), "id=")
			return q, true
		}
	}
}
