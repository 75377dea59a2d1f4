// Package conn implements connection actors: one actor per socket. A connection
// actor dials (TCP, proxy tunnel, TLS), watches its socket while idle, writes
// requests and reads response heads with net/http's own machinery
// (http.Request.Write, http.ReadResponse), and hands the response back with a body
// that streams from the socket. It knows nothing of pool limits: its parent, a
// route actor, decides when it is leased, re-used or closed.
//
// Connection actors have an inline-first mailbox (internal/mailbox): a
// message to an idle connection actor is processed on the sender's goroutine.
// The lease holder's ExchangeRequest is therefore served without a goroutine
// switch or an allocation, while the route actor only ever sends non-blocking
// messages (WatchIdle, Stop). Between an ExchangeResponse and
// the Done callback the socket's reader is lent to the response body, which the
// caller reads on its own goroutine, and a request's body is written by a
// goroutine of the client's (full duplex, see reqWriter); those are the places
// state leaves Receive. A request without a body is written on the caller's
// goroutine.
package conn

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn/h2"
	"github.com/connactor/connactor/internal/mailbox"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

// Options configure every connection of a client. They are read-only once the
// first connection actor is spawned.
type Options struct {
	DialTimeout            time.Duration // bound on TCP connect plus tunnel and TLS
	TLSConfig              *tls.Config   // base TLS configuration (nil = system roots)
	TLSHandshakeTimeout    time.Duration // 0 = bounded by DialTimeout only
	ResponseHeaderTimeout  time.Duration // 0 = none
	MaxResponseHeaderBytes int64         // > 0
	ExpectContinueTimeout  time.Duration // wait for 100 Continue before a body; 0 = send at once

	// ALPN is the protocol list a TLS handshake with a target offers (nil =
	// http/1.1 only; see ALPNFor). When the server picks "h2" the connection
	// speaks HTTP/2 (conn/h2).
	ALPN []string
	// H2C makes plain http connections (not through an HTTP proxy) speak
	// HTTP/2 with prior knowledge.
	H2C bool
	// HTTP2 configures HTTP/2 connections (net/http's type; nil = its defaults).
	HTTP2 *http.HTTP2Config

	// DialContext dials TCP; nil uses a net.Dialer. Tests use it to count dials.
	// Through a proxy it dials the proxy. A dial to endpoints (DialRequest.To)
	// gives it "ip:port".
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Resolver, when set, looks up the host of a dial by name (one without
	// endpoints), which then dials its addresses as net.Dialer would
	// (resolveDial); nil = net.Dialer's own resolution, or DialContext
	// given the host name.
	Resolver Resolver
	// ProxyCredentials holds the credentials of proxied routes (route keys keep
	// only their hash); nil sends none.
	ProxyCredentials *route.Credentials
	// Fault is the fault-injection hook of tests (nil in production): called
	// with "conn" and each message at the start of Receive; tests panic in it
	// to fail the actor as a bug would.
	Fault func(kind string, msg any)
	// IdleWatchDelay replaces the package's IdleWatchDelay when set (0 = that
	// default): tests push the watch out to leave a server's close of an idle
	// connection to the probe.
	IdleWatchDelay time.Duration
	// Go starts a goroutine owned by the client (dials and idle watchers), which
	// waits for them on Close. It must not be nil.
	Go func(func())
	// Home is the client's home goroutine (see wait.Home): a dial asked for
	// by a caller in a testing/synctest bubble that the client is not in is
	// handed to a dial worker from there, and its deadline read from the real
	// clock there. nil = no caller is ever foreign.
	Home   *wait.Home
	Logger *slog.Logger

	// dials keeps the goroutines that dial (see dialWorkers): the one part of
	// Options that changes after the first connection, safely for concurrent
	// use. Options must not be copied once used.
	dials dialWorkers

	// testHookBackOff, set by this package's tests only, is called by
	// backOffWatch between its read of the delay and its swap.
	testHookBackOff func()
}

// inlineBudget is how many messages a connection actor processes on a
// sender's goroutine when it was idle (see mailbox.Inline): one, the sender's
// own. A response without a body ends its exchange inside Receive, and the
// route may hand the connection to the next caller at once; with a larger
// budget that caller's ExchangeRequest ran on the first caller's goroutine
// after its own, so the first RoundTrip returned only once the second one's
// response head had arrived. Whatever queues meanwhile runs on a goroutine of
// the mailbox's.
const inlineBudget = 1

// Props returns the props of the connection actor numbered id (unique within its
// route) for route key k, which dials by name. life bounds the dial: it ends
// when the client closes. The actor must be spawned as a child of the route
// actor: it reports to its parent.
// Its mailbox is inline (messages run on the sender's goroutine, without an
// allocation per message), and its own: the actor closes it when it stops,
// so that an ExchangeRequest posted to it afterwards is answered (see
// Dialed.Inbox).
func Props(id uint64, k route.Key, opt *Options, life context.Context) *actor.Props {
	return DialProps(k, opt, DialRequest{ID: id, Life: life})
}

// DialProps returns the props of a connection actor for route key k whose
// first dial is d (as a recycled actor's DialRequest: its ID, its life, its
// endpoints).
func DialProps(k route.Key, opt *Options, d DialRequest) *actor.Props {
	addr := k.Addr()
	mb := mailbox.New(inlineBudget)
	return actor.PropsFromProducer(func() actor.Actor {
		return &Actor{id: d.ID, key: k, addr: addr, opt: opt, life: d.Life, to: d.To, mb: mb}
	}, actor.WithMailbox(mb.Producer()))
}

// Actor is a connection actor. All fields are touched only inside Receive, except
// dialed and stopped (a hand-off with the dial goroutine), and what is lent
// between an ExchangeResponse and the exchange's end, when the route sends the
// actor nothing but Stop: the socket reader (br, rd) to the response body,
// which also marks the connection broken when its end finds it unusable; the
// writer (bw, wr, head, proxyAuth) to the request's writer goroutine (see the
// package comment and lent).
type Actor struct {
	id   uint64
	key  route.Key
	addr string // key.Addr(), made once (Props): a recycled actor keeps its route
	opt  *Options
	life context.Context
	to   Endpoints // where the current dial goes (zero: by name)

	sys      *actor.ActorSystem
	self     *actor.PID
	parent   *actor.PID
	mb       *mailbox.Mailbox // the actor's own; closed when it stops
	recycled *Recycled        // made by the first recycle, sent by every one

	nc  net.Conn
	rd  *countingReader // under br: counts response bytes, bounds the header size (&rdv)
	wr  *countingWriter // under bw: counts request bytes written (&wrv)
	rdv countingReader
	wrv countingWriter
	br  *bufio.Reader // from bufPool; given back when the actor stops, unless lent
	bw  *bufio.Writer
	// lent counts the holders of br and bw outside Receive: a response body
	// being read, a request writer on its own goroutine, an upgraded
	// connection (for good). Incremented in Receive only; the buffers go back
	// to their pools when the actor stops with none left.
	lent atomic.Int32

	head           headWriter // writes request heads (reqwrite.go); used by one request's writer at a time
	proxyAuth      string     // Proxy-Authorization of an absolute-form route, once known
	proxyAuthKnown bool

	served int        // exchanges started on this connection
	probe  *idleProbe // nil when the socket cannot be reached
	h2     *h2.Conn   // set when the connection speaks HTTP/2 (h2conn.go): streams go to it directly

	// pending is the ExchangeRequest being handled, until it is answered: a
	// connection actor that fails (a panic escalated to its route, which
	// stops it) answers it when it stops, so its caller never waits forever.
	pending *ExchangeRequest

	cancelDial context.CancelFunc
	dialing    bool                     // a dial runs: from startDial to its dialResult
	dialed     atomic.Pointer[net.Conn] // hand-off from the dial goroutine
	stopped    atomic.Bool

	// The idle watch (watch.go). watch, the watch's state and its idle
	// period, is shared with the watch timer and the watcher goroutine;
	// watchErr is written by the watcher before it signals watchDone.
	watch      atomic.Uint64
	watchTimer *time.Timer
	// watchSet is true while watchTimer is scheduled (Reset, not yet fired or
	// stopped). The timer is not stopped when a lease disarms the watch, nor
	// reset when the connection goes idle again while it is set: it fires on
	// its own schedule, and fireWatch sets it again for the current idle
	// period (see onWatchIdle).
	watchSet  atomic.Bool
	watchDone chan struct{} // cap 1, one value per watcher run
	watchErr  error
	watchFrom time.Time // when the watcher began to look; written before watchDone, as watchErr
	// watchDelay is this socket's idle watch delay: IdleWatchDelay at first,
	// doubled (up to MaxIdleWatchDelay) each time a watch was wasted: a lease
	// had to interrupt a running watcher (stopWatch), or the timer fired to
	// find the connection used since it was set (fireWatch); back to
	// IdleWatchDelay when a lease interrupts a watcher that had looked for a
	// full delay (stopWatch). 0 = IdleWatchDelay. Shared with the timer
	// goroutine.
	watchDelay atomic.Int64
	broken     bool // the socket is unusable; the route will close it
}

// Receive handles the connection actor's messages.
func (c *Actor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	if m, ok := msg.(*ExchangeRequest); ok {
		c.pending = m // answered by onExchange, or by onStopping if the actor fails first
	}
	if c.opt.Fault != nil {
		c.opt.Fault("conn", msg)
	}
	switch m := msg.(type) {
	case *actor.Started:
		c.onStarted(ctx)
	case *dialResult:
		c.onDialResult(m)
	case *ExchangeRequest:
		c.onExchange(m)
	case *WatchIdle:
		c.onWatchIdle()
	case *RecycleRequest:
		c.onRecycle(ctx)
	case *DialRequest:
		c.id, c.life, c.to = m.ID, m.Life, m.To
		c.startDial()
	case *actor.Stopping:
		c.onStopping()
	case *actor.Stopped:
		c.mb.Close() // what reaches the actor from now on is answered (Undeliverable)
	case *actor.Restarting:
	default:
		c.opt.Logger.Warn("conn: unknown message", "type", fmt.Sprintf("%T", m))
	}
}

func (c *Actor) onStarted(ctx actor.Context) {
	c.sys, c.self, c.parent = ctx.ActorSystem(), ctx.Self(), ctx.Parent()
	c.startDial()
}

// startDial dials the actor's socket on a dial worker, which reports back
// with a dialResult. The dial is bounded by DialTimeout and by the actor's
// stop, which cancels it (onStopping; Client.Close stops every actor). Its
// context keeps life's values (the waiting request's httptrace hooks) but not
// life's cancellation: registering each dial with the client's lifetime, and
// taking it out again, cost about 0.4 us a dial (BenchmarkDial in actors/).
//
// A dial started by a caller in a testing/synctest bubble that the client is
// not in (Options.Home) is handed to a dial worker by the client's home
// goroutine, and its deadline is set there, on the dial worker: a deadline
// set here would be a timer of the bubble's, read from its fake clock, and
// the worker could not stop it.
func (c *Actor) startDial() {
	c.dialing = true
	// One clock read for the deadline and for the dial's Took (which thus
	// counts the hand-off to a dial worker too).
	start := time.Now()
	if c.opt.Home.Foreign(start) {
		dctx, cancel := context.WithCancel(context.WithoutCancel(c.life)) // no timer: the worker sets the deadline
		c.cancelDial = cancel
		res := &dialResult{c: c, sys: c.sys, self: c.self, key: c.key, addr: c.addr, opt: c.opt,
			ctx: dctx, cancel: cancel, foreign: true, dialLog: dialLog{to: c.to}}
		opt, life := c.opt, c.life
		if !opt.Home.Do(func() { opt.dials.run(opt, life, res) }) {
			// The client's life has ended: no worker will dial. The actor
			// hears so after this message, as from a worker.
			cancel()
			res.err = errNotDialed
			c.sys.Root.Send(c.self, res)
		}
		return
	}
	dctx, cancel := context.WithDeadline(context.WithoutCancel(c.life), start.Add(c.opt.DialTimeout))
	c.cancelDial = cancel
	// The job, its result and the report to the route are one allocation.
	// The worker reads only the job's fields (copies of the actor's, made
	// here) and the actor's two atomics.
	res := &dialResult{c: c, sys: c.sys, self: c.self, key: c.key, addr: c.addr, opt: c.opt,
		ctx: dctx, cancel: cancel, start: start, dialLog: dialLog{to: c.to}}
	c.opt.dials.run(c.opt, c.life, res)
}

// run is the dial itself, on a dial worker (owned by the client); bounded by
// DialTimeout and by the actor's stop.
func (res *dialResult) run() {
	defer res.cancel()
	if res.foreign {
		// Started from a foreign bubble: the deadline comes from this
		// goroutine's clock, the real one.
		res.start = time.Now()
		var cancel context.CancelFunc
		res.ctx, cancel = context.WithDeadline(res.ctx, res.start.Add(res.opt.DialTimeout))
		defer cancel()
	}
	c := res.c
	nc, err := dialTimed(res.ctx, res.key, res.addr, res.opt, &res.dialLog)
	if err == nil {
		res.nc = nc
		c.dialed.Store(&res.nc)
		if c.stopped.Load() {
			if c.dialed.CompareAndSwap(&res.nc, nil) {
				nc.Close()
			}
			return
		}
	}
	res.err, res.took = err, time.Since(res.start)
	res.sys.Root.Send(res.self, res)
}

func (c *Actor) onDialResult(m *dialResult) {
	c.dialing = false
	if m.err != nil {
		c.sys.Root.Send(c.parent, m.report(c.id, m.err, nil))
		return
	}
	p := c.dialed.Swap(nil)
	if p == nil {
		return // stopped meanwhile; onStopping closed it
	}
	c.nc = *p
	if c.speaksH2() {
		c.startH2(m)
		return
	}
	c.rdv = countingReader{r: c.nc, limit: -1}
	c.wrv.w = c.nc
	c.rd, c.wr = &c.rdv, &c.wrv
	c.br, c.bw = newReader(c.rd), newWriter(c.wr)
	c.probe = newIdleProbe(c.nc)
	c.makeWatch()
	d := m.report(c.id, nil, c.nc)
	d.Inbox = c.mb
	c.sys.Root.Send(c.parent, d)
}

// tlsState is the connection's TLS state, read once: every response of the
// connection shares it (resp.TLS), as with net/http.
func tlsState(nc net.Conn) *tls.ConnectionState {
	if tc, ok := nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		return &st
	}
	return nil
}

func (c *Actor) onStopping() {
	c.stopped.Store(true)
	if m := c.pending; m != nil {
		c.pending = nil
		m.Reply.Deliver(ExchangeResponse{Err: &ExchangeError{Op: "write", Reused: m.Reused, Written: c.wr != nil && c.wr.n.Load() > 0,
			Err: ErrConnActorFailed}})
	}
	if c.cancelDial != nil {
		c.cancelDial()
	}
	if p := c.dialed.Swap(nil); p != nil {
		(*p).Close()
	}
	c.dropSocket()
}

// dropSocket closes the socket at once, waits for a running idle watcher (the
// socket is closed, so its peek has returned or returns now), and gives the
// buffers back to the pool when nobody outside Receive holds them (and nobody
// will: no exchange starts after Stopping, or after a recycle). Called inside
// Receive (onStopping, onRecycle).
func (c *Actor) dropSocket() {
	if c.nc != nil {
		closeRaw(c.nc) // on the route's (or a sender's) goroutine: never wait for a TLS alert
	}
	if c.watchTimer != nil {
		// A timer stopped before it fired will not fire: the next socket's
		// first idle period sets it. One that is firing now may set itself
		// again, and then finds the watch off, or, on a recycled actor, may
		// watch the next socket's first idle period sooner than a full delay
		// into it (the probe is unaffected); it does not back the next
		// socket's watch delay off (watchInherited, backOffWatch).
		if c.watchTimer.Stop() {
			c.watchSet.Store(false)
		}
		if c.disarmWatch() {
			<-c.watchDone
			c.watchOver()
		}
	}
	if c.br != nil && c.lent.Load() == 0 {
		putReader(c.br)
		putWriter(c.bw)
		c.br, c.bw = nil, nil
	}
}

var aLongTimeAgo = time.Unix(1, 0)

// CloseNow closes the socket under nc at once (closeRaw): safe for concurrent
// use and idempotent, it is how the owner of a connection (its route) aborts
// it, and interrupts an exchange blocked in I/O. nil is a no-op.
func CloseNow(nc net.Conn) {
	if nc != nil {
		closeRaw(nc)
	}
}

// closeRaw closes the socket under nc at once. A *tls.Conn's own Close first
// writes a close_notify alert, which can block for seconds on a full socket; an
// abort (eviction, expiry, client close) or a connection given up as broken
// (a body closed early, a failed exchange) must not wait for that.
func closeRaw(nc net.Conn) {
	if tc, ok := nc.(interface{ NetConn() net.Conn }); ok {
		tc.NetConn().Close()
		return
	}
	nc.Close()
}

func isTimeout(err error) bool {
	if ne, ok := err.(net.Error); ok { // the usual *net.OpError, without errors.As's allocation
		return ne.Timeout()
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
