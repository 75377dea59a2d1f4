package faultserver

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
)

// Dialer dials TCP with a net.Dialer and counts the sockets it returns, in total
// and per address: open now, the peak, dialed and closed. A socket counts as
// open from a successful dial until its first Close. Give its DialContext to
// the client under test (client.Config.DialContext, http.Transport.DialContext):
// at rest, a client's open sockets must equal its idle connections.
//
// Its resolver answers NXDOMAIN for every name in-process (NXDomainResolver), so
// only IP addresses dial, and a .invalid host fails the way DNS failures do
// without a query leaving the machine. Safe for concurrent use.
type Dialer struct {
	d net.Dialer

	mu        sync.Mutex
	open      map[string]int
	peak      map[string]int
	total     int
	peakTotal int
	dialed    int
	closed    int
	failed    int
}

// NewDialer returns a Dialer with no socket counted.
func NewDialer() *Dialer {
	return &Dialer{d: net.Dialer{Resolver: NXDomainResolver()},
		open: make(map[string]int), peak: make(map[string]int)}
}

// DialContext dials addr and counts the socket.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	nc, err := d.d.DialContext(ctx, network, addr)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.failed++
		return nil, err
	}
	d.dialed++
	d.total++
	d.open[addr]++
	d.peakTotal = max(d.peakTotal, d.total)
	d.peak[addr] = max(d.peak[addr], d.open[addr])
	return &countedConn{Conn: nc, d: d, addr: addr}, nil
}

// DialerCounts is a snapshot of a Dialer's counters.
type DialerCounts struct {
	Open, Peak             int // sockets open now, and at most at once
	Dialed, Closed, Failed int // successful dials, closes of those, failed dials
}

// Counts returns the totals across addresses.
func (d *Dialer) Counts() DialerCounts {
	d.mu.Lock()
	defer d.mu.Unlock()
	return DialerCounts{Open: d.total, Peak: d.peakTotal, Dialed: d.dialed, Closed: d.closed, Failed: d.failed}
}

// PeakPerAddr returns the peak of open sockets to each address dialed.
func (d *Dialer) PeakPerAddr() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := make(map[string]int, len(d.peak))
	for k, v := range d.peak {
		m[k] = v
	}
	return m
}

func (d *Dialer) release(addr string) {
	d.mu.Lock()
	d.total--
	d.open[addr]--
	d.closed++
	d.mu.Unlock()
}

// countedConn counts its first Close. It passes SyscallConn and CloseWrite
// through, so a client that peeks at the socket or half-closes it sees the same
// socket it would without the count.
type countedConn struct {
	net.Conn
	d    *Dialer
	addr string
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.d.release(c.addr) })
	return err
}

func (c *countedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("faultserver: no SyscallConn")
}

func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("faultserver: no CloseWrite")
}
