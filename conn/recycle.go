package conn

import (
	"github.com/asynkron/protoactor-go/actor"
)

// Recycling: a connection actor whose connection closed can serve the next
// socket of its route (RecycleRequest, then DialRequest), which spares the
// route a spawn and a stop per dial: props, a PID and a registry entry, a
// mailbox, Started, and Stopping, Stopped and Terminated (BenchmarkDial in
// actors/). Nothing of the old socket may reach the new one: the actor is
// recycled only when nobody outside Receive holds its state (no dial
// running, nothing lent), the idle watcher is waited for, and every field of
// the socket is reset (TestRecycledConnectionActorKeepsNothingOfItsSocket
// checks the list).

// onRecycle closes the socket (the route aborted it already) and resets the
// actor for another one, or stops the actor when it cannot be re-used.
func (c *Actor) onRecycle(ctx actor.Context) {
	// The actor decides (the route asks only for HTTP/1.1 connections that
	// are not dialing): a socket still being dialed (dialed is set only
	// then), an HTTP/2 engine, or buffers lent to a body or a request writer
	// rule a recycle out. No exchange is pending between messages.
	if c.dialing || c.h2 != nil || c.lent.Load() != 0 {
		ctx.Stop(c.self) // onStopping cleans up as for any stop
		return
	}
	c.dropSocket() // nothing is lent (checked above): the buffers go back
	c.resetSocket()
	if c.recycled == nil {
		c.recycled = &Recycled{PID: c.self} // the actor's one answer, never changed
	}
	ctx.Send(c.parent, c.recycled)
}

// resetSocket forgets everything of the actor's socket. What it keeps is what
// does not belong to one socket: the route's key, address and options, the
// actor's place in the actor system, the idle watch's timer and channel
// (reused, as across idle periods of one socket; the watch is off, its timer
// marked as inherited), and the atomics, whose values are those of an actor
// with no socket.
func (c *Actor) resetSocket() {
	c.id, c.life, c.to = 0, nil, Endpoints{}
	c.nc, c.rd, c.wr = nil, nil, nil
	c.rdv = countingReader{}
	c.wrv.w, c.wrv.err = nil, nil
	c.wrv.n.Store(0)
	c.br, c.bw = nil, nil
	c.head = headWriter{}
	c.proxyAuth, c.proxyAuthKnown = "", false
	c.served = 0
	c.probe = nil
	c.h2 = nil
	c.pending = nil
	c.cancelDial = nil
	c.dialing = false
	c.watchErr = nil
	c.watchDelay.Store(0)
	// The watch is off (dropSocket); a timer firing that dropSocket could not
	// stop may still run, and must not count against the next socket.
	c.watch.Or(watchInherited)
	c.broken = false
}
