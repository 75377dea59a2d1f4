package conn

import (
	"crypto/tls"
	"sync"

	"github.com/connactor/connactor/conn/h2"
)

// speaksH2 reports whether the connection just dialed speaks HTTP/2: the
// server picked "h2" by ALPN, or the route is plain http with HTTP/2 by prior
// knowledge (h2c; never through an HTTP proxy, which forwards HTTP/1.1).
func (c *Actor) speaksH2() bool {
	if tc, ok := c.nc.(*tls.Conn); ok {
		return tc.ConnectionState().NegotiatedProtocol == "h2"
	}
	return c.key.Scheme == "http" && c.opt.H2C && !c.key.AbsoluteForm()
}

// startH2 makes the connection an HTTP/2 client connection and reports it:
// the route leases its streams, and lease holders call its RoundTrip on their
// own goroutines (a mailbox would serialize streams). The connection actor
// keeps it to close it when it stops, and forwards its events to the route.
func (c *Actor) startH2(m *dialResult) {
	ev := newH2Events(c)
	hc, err := h2.New(c.nc, h2.Options{
		HTTP2:                  c.opt.HTTP2,
		MaxResponseHeaderBytes: c.opt.MaxResponseHeaderBytes,
		ResponseHeaderTimeout:  c.opt.ResponseHeaderTimeout,
		ExpectContinueTimeout:  c.opt.ExpectContinueTimeout,
		Events:                 ev.callbacks(),
	})
	if err != nil {
		closeRaw(c.nc)
		c.sys.Root.Send(c.parent, m.report(c.id, err, nil))
		return
	}
	c.h2 = hc
	ev.start()
	d := m.report(c.id, nil, c.nc)
	d.H2 = hc
	c.sys.Root.Send(c.parent, d)
}

// h2Events carries an HTTP/2 connection's events to its route. The
// connection calls back under its own lock, where nothing may block or call
// it, and a route actor whose mailbox is idle would run on the caller's
// goroutine (and could stop the connection there): so the callbacks only
// queue, and a goroutine of the client's sends the messages, in order.
type h2Events struct {
	c      *Actor
	mu     sync.Mutex
	queue  []any
	closed bool // H2Closed is queued: the pump ends after sending it
	wake   chan struct{}
}

func newH2Events(c *Actor) *h2Events { return &h2Events{c: c, wake: make(chan struct{}, 1)} }

func (e *h2Events) callbacks() h2.Events {
	id := e.c.id
	return h2.Events{
		StreamsChanged: func(h2.Streams) { e.push(&StreamsChanged{ID: id}, false) },
		Draining:       func(r h2.Reason) { e.push(&DrainStarted{ID: id, Reason: r}, false) },
		Closed:         func(r h2.Reason, err error) { e.push(&H2Closed{ID: id, Reason: r, Err: err}, true) },
	}
}

func (e *h2Events) push(msg any, last bool) {
	e.mu.Lock()
	e.queue = append(e.queue, msg)
	e.closed = e.closed || last
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// start runs the pump: owned by the client's WaitGroup, it ends once the
// connection's H2Closed is sent.
func (e *h2Events) start() {
	sys, parent := e.c.sys, e.c.parent
	e.c.opt.Go(func() {
		for range e.wake {
			e.mu.Lock()
			batch, last := e.queue, e.closed
			e.queue = nil
			e.mu.Unlock()
			for _, m := range batch {
				sys.Root.Send(parent, m)
			}
			if last {
				return
			}
		}
	})
}
