package conn

import (
	"net"
	"net/netip"
	"time"
)

// dialLog is what one dial did, for its report to the route (Dialed): where
// it was to go (to), where its TCP connection went (peer), which of its
// endpoints failed to connect (failed), and how long its TCP connects (to the
// target, or to the proxy; name resolution included) and TLS handshakes took
// (Dialed.Connect, Dialed.TLS). It is used by the dial goroutine only; its
// methods do nothing on a nil *dialLog, which dials by name.
type dialLog struct {
	to           Endpoints // set before the dial; zero = resolve the host (by name)
	peer         netip.AddrPort
	failed       Endpoints
	connect, tls time.Duration
}

// endpoints returns where the dial goes: the zero Endpoints on a nil log.
func (d *dialLog) endpoints() Endpoints {
	if d == nil {
		return Endpoints{}
	}
	return d.to
}

// reached records the address the TCP connection reached, failed the
// endpoints whose connects failed.
func (d *dialLog) reached(peer netip.AddrPort, failed Endpoints) {
	if d != nil {
		d.peer, d.failed = peer, failed
	}
}

func (d *dialLog) now() time.Time {
	if d == nil {
		return time.Time{}
	}
	return time.Now()
}

func (d *dialLog) addConnect(start time.Time) {
	if d != nil {
		d.connect += time.Since(start)
	}
}

func (d *dialLog) addTLS(start time.Time) {
	if d != nil {
		d.tls += time.Since(start)
	}
}

// remoteAddrPort is nc's remote address when it is a TCP one (a dial by name
// learns where it went from it); zero otherwise (a DialContext of the user's
// may return anything).
func remoteAddrPort(nc net.Conn) netip.AddrPort {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}
