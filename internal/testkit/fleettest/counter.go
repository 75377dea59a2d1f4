package fleettest

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
)

// Counter counts open sockets across the clients that share it: one is counted
// from the moment its dial starts until it is closed (a failed dial counts
// until it failed), which is what a fleet budget limits. It is safe for
// concurrent use.
type Counter struct {
	open atomic.Int64
	peak atomic.Int64
}

// Open is the number of sockets open (or dialing) now.
func (c *Counter) Open() int { return int(c.open.Load()) }

// Peak is the most sockets that were open at once.
func (c *Counter) Peak() int { return int(c.peak.Load()) }

func (c *Counter) inc() {
	n := c.open.Add(1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (c *Counter) dec() { c.open.Add(-1) }

// DialContext dials addr, counting the socket in c: give it to
// client.Config.DialContext of every node that shares the count.
func (c *Counter) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c.inc()
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		c.dec()
		return nil, err
	}
	return &countedConn{Conn: conn, c: c}, nil
}

type countedConn struct {
	net.Conn
	c    *Counter
	once sync.Once
}

func (cc *countedConn) Close() error {
	err := cc.Conn.Close()
	cc.once.Do(cc.c.dec)
	return err
}
