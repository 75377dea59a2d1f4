package client

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Request is the message an actor of the embedding service sends to the
// client's actor, in the same actor system:
//
//	ctx.Request(c.PID(), &client.Request{HTTP: req, Tag: id})
//
// The client runs the request on a goroutine of its own and answers the sender
// with a *Response when the response head arrives or the request fails; the
// sender's mailbox is never blocked meanwhile. A Request sent without a sender
// (ctx.Send instead of ctx.Request) is dropped, its body closed, with a warning
// in the log. The request's context bounds it as with RoundTrip.
type Request struct {
	HTTP *http.Request // the request to send
	Tag  any           // returned unchanged in the Response, to correlate
}

// Response is the client's answer to a Request. The receiving actor reads
// HTTP.Body and closes it, which releases the connection; until then the
// connection stays leased.
//
// If the requesting actor stops before its Response arrives, or stops
// without having read or closed a body it received, the client closes that
// body and releases its connection (a body handed to another goroutine must
// be read or closed before the actor stops).
type Response struct {
	HTTP *http.Response // nil when Err is set
	Err  error          // the transport failure, as RoundTrip returns it
	Req  *http.Request  // the request this answers, also on error
	Tag  any            // the Request's Tag
}

// bridge is the client's actor for callers that are actors (PID): it runs
// each Request on a goroutine of the client's, delivers the Response to the
// caller from its own Receive, and watches callers, so that a Response nobody
// can read is closed instead of holding its connection forever.
type bridge struct {
	c       *Client
	self    *actor.PID
	callers map[string]*actorCaller // by PID.Id
}

// actorCaller is one requesting actor as the bridge knows it.
type actorCaller struct {
	pid      *actor.PID
	inFlight int                      // Requests not yet answered
	bodies   map[*bridgeBody]struct{} // delivered bodies not yet at their end
	stopped  bool                     // Terminated seen: answers are closed, not sent
}

// responded is sent by a Request's goroutine to the bridge when RoundTrip
// returns. No reply.
type responded struct {
	to   *actorCaller
	resp *Response
}

// bodyEnded is sent by a delivered body to the bridge when it reaches its end
// or is closed. No reply.
type bodyEnded struct {
	to   *actorCaller
	body *bridgeBody
}

func (b *bridge) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Request:
		b.onRequest(ctx, m)
	case *responded:
		b.onResponded(ctx, m)
	case *bodyEnded:
		delete(m.to.bodies, m.body)
		b.forget(m.to)
	case *actor.Terminated:
		b.onTerminated(m)
	case *actor.Started:
		b.self = ctx.Self()
		b.callers = map[string]*actorCaller{}
	case *actor.Stopping, *actor.Stopped, *actor.Restarting:
	default:
		b.c.cfg.Logger.Warn("connactor: client actor: unknown message", "type", fmt.Sprintf("%T", m))
	}
}

func (b *bridge) onRequest(ctx actor.Context, m *Request) {
	sender := ctx.Sender()
	if sender == nil {
		b.c.cfg.Logger.Warn("connactor: Request sent without a sender (use ctx.Request); dropped")
		closeBody(m.HTTP)
		return
	}
	cl := b.callers[sender.Id]
	if cl == nil {
		cl = &actorCaller{pid: sender, bodies: map[*bridgeBody]struct{}{}}
		b.callers[sender.Id] = cl
		ctx.Watch(sender)
	}
	cl.inFlight++
	c, self, sys := b.c, b.self, ctx.ActorSystem()
	started := c.disp.GoIfOpen(func() { // owned by the client's WaitGroup; bounded by the request's context and Close
		r := &Response{Req: m.HTTP, Tag: m.Tag}
		r.HTTP, r.Err = c.RoundTrip(m.HTTP)
		sys.Root.Send(self, &responded{to: cl, resp: r})
	})
	if !started {
		closeBody(m.HTTP)
		b.onResponded(ctx, &responded{to: cl, resp: &Response{Err: ErrClosed, Req: m.HTTP, Tag: m.Tag}})
	}
}

// onResponded delivers a Response to its caller, or closes it when the caller
// has stopped.
func (b *bridge) onResponded(ctx actor.Context, m *responded) {
	cl, r := m.to, m.resp
	cl.inFlight--
	if r.HTTP != nil && r.HTTP.Body != nil && r.HTTP.Body != http.NoBody {
		if cl.stopped {
			b.discard(r.HTTP.Body) // nobody can read it: release the connection
			b.forget(cl)
			return
		}
		body := &bridgeBody{rc: r.HTTP.Body, to: cl, bridge: b.self, sys: ctx.ActorSystem()}
		cl.bodies[body] = struct{}{}
		r.HTTP.Body = body
	}
	if !cl.stopped {
		ctx.Send(cl.pid, r)
	}
	b.forget(cl)
}

// onTerminated closes the bodies a stopped caller never touched, and those
// that reach it later.
func (b *bridge) onTerminated(m *actor.Terminated) {
	cl := b.callers[m.Who.Id]
	if cl == nil {
		return
	}
	cl.stopped = true
	for body := range cl.bodies {
		if !body.touched.Load() {
			b.discard(body) // its bodyEnded follows
		}
	}
	b.forget(cl)
}

// discard closes a body nobody will read, off the actor's goroutine: closing
// may drain a small rest of the body (up to 50 ms), which the bridge must not
// wait for. When the client is closing, its connections are being closed
// anyway, and Close returns at once.
func (b *bridge) discard(body io.Closer) {
	if !b.c.disp.GoIfOpen(func() { body.Close() }) { // owned by the client's WaitGroup; bounded by the drain limits
		body.Close()
	}
}

// forget drops a caller that has stopped and holds nothing any more. A caller
// that is alive stays known (and watched) while it has requests in flight.
func (b *bridge) forget(cl *actorCaller) {
	if cl.inFlight == 0 && len(cl.bodies) == 0 {
		if b.callers[cl.pid.Id] == cl {
			delete(b.callers, cl.pid.Id)
		}
		// A caller that is alive is watched again on its next Request; the
		// Terminated of an old watch finds no entry and is ignored.
	}
}

// bridgeBody is a Response's body as delivered to an actor: it tells the
// bridge when it has been touched (so that a stopped caller's untouched body
// is closed) and when it ended.
type bridgeBody struct {
	rc      io.ReadCloser
	to      *actorCaller
	bridge  *actor.PID
	sys     *actor.ActorSystem
	touched atomic.Bool
	ended   atomic.Bool
}

func (b *bridgeBody) Read(p []byte) (int, error) {
	b.touched.Store(true)
	n, err := b.rc.Read(p)
	if err != nil {
		b.end()
	}
	return n, err
}

func (b *bridgeBody) Close() error {
	b.touched.Store(true)
	err := b.rc.Close()
	b.end()
	return err
}

func (b *bridgeBody) end() {
	if b.ended.CompareAndSwap(false, true) {
		b.sys.Root.Send(b.bridge, &bodyEnded{to: b.to, body: b})
	}
}
