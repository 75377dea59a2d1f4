package conn

import (
	"net"
	"reflect"
	"sync"
	"syscall"
	"time"
)

// idleProbe looks at a pooled connection's socket, without blocking, just before
// a request is written to it: a server that closed an idle
// connection without announcing it, or sent bytes nobody asked for, is found
// before anything is written, and the request fails with ErrStaleConn and
// ErrNotSent, which the client replays on a new connection whatever its method.
// The idle watch (see onWatchIdle) only looks after IdleWatchDelay (longer for a
// connection whose watches leases keep interrupting); the probe covers the
// connections leased again sooner, which under load is most of them.
//
// The probe is one recvfrom(MSG_PEEK|MSG_DONTWAIT) on the socket under every
// wrapper (a past read deadline cannot do this: Go's poller reports the
// deadline before it makes any syscall). It does not allocate. Its outcomes:
// EAGAIN is a clean socket; 0 bytes is the peer's FIN; an error (ECONNRESET) is
// a dead socket; bytes are unsolicited, except under a layer such as TLS, where
// they may be a late post-handshake message (a TLS 1.3 NewSessionTicket or
// KeyUpdate): those are decided by a read through the connection itself with a
// short deadline. Handshake records consumed and then a timeout is clean;
// application data, close_notify or EOF is stale.
//
// Connections with no socket to reach (net.Pipe, wrappers that hide theirs)
// get no probe (nil); the idle watch and the exchange's own errors remain.
type idleProbe struct {
	rc      syscall.RawConn
	layered bool                  // the exchange's net.Conn is not the socket itself
	peekFn  func(fd uintptr) bool // p.peek, bound once: no allocation per check
	n       int
	err     error
	buf     [1]byte
}

// layerProbeWait bounds the read that decides what bytes pending under a layer
// (TLS) are. It is paid only when such bytes are pending on a pooled connection.
const layerProbeWait = 5 * time.Millisecond

// probeResult is what a probe found.
type probeResult int

const (
	probeClean        probeResult = iota // nothing waiting on the socket
	probeCleanOfLayer                    // the layer's own records were waiting, and consumed
	probeStale                           // closed, reset, or bytes nobody asked for
)

// newIdleProbe finds the socket under nc: nc itself, or under wrappers that
// expose what they wrap (NetConn() net.Conn, as *tls.Conn has; or a struct
// embedding net.Conn, the usual counting or logging wrapper, and x/net's SOCKS
// connection). It returns nil when there is none. It runs once per connection.
func newIdleProbe(nc net.Conn) *idleProbe {
	layered := false
	for range 8 {
		switch c := nc.(type) {
		case *net.TCPConn, *net.UnixConn:
			return newSocketProbe(c.(syscall.Conn), layered)
		case syscall.Conn:
			// A socket of some other type, or a type embedding one that may
			// change what Read returns: pending bytes are confirmed through it.
			return newSocketProbe(c, true)
		}
		if nc = unwrapConn(nc); nc == nil {
			return nil
		}
		layered = true
	}
	return nil
}

func newSocketProbe(sc syscall.Conn, layered bool) *idleProbe {
	if !canPeek {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &idleProbe{rc: rc, layered: layered}
	p.peekFn = p.peek
	return p
}

var netConnType = reflect.TypeFor[net.Conn]()

// embeddedConns caches, per struct type, the indexes of its exported embedded
// net.Conn fields (none for most types): a type's fields are walked once, not
// at every dial.
var embeddedConns sync.Map // reflect.Type -> []int

// unwrapConn returns the connection nc wraps, or nil.
func unwrapConn(nc net.Conn) net.Conn {
	if w, ok := nc.(interface{ NetConn() net.Conn }); ok {
		return w.NetConn()
	}
	v := reflect.ValueOf(nc)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	v = v.Elem()
	t := v.Type()
	var fields []int
	if f, ok := embeddedConns.Load(t); ok {
		fields = f.([]int)
	} else {
		for i := range t.NumField() {
			if f := t.Field(i); f.Anonymous && f.IsExported() && f.Type == netConnType {
				fields = append(fields, i)
			}
		}
		embeddedConns.Store(t, fields)
	}
	for _, i := range fields {
		if inner, ok := v.Field(i).Interface().(net.Conn); ok && inner != nil {
			return inner
		}
	}
	return nil
}

// check probes the socket; nc is the connection the exchange reads, used only
// when bytes are pending under a layer. It must not run concurrently with a
// read of the connection (the idle watcher is stopped first).
func (p *idleProbe) check(nc net.Conn) (probeResult, error) {
	p.n, p.err = 0, nil
	if err := p.rc.Read(p.peekFn); err != nil {
		return probeStale, err // the socket is closed, or a past deadline is on it
	}
	switch {
	case p.err == syscall.EAGAIN || p.err == syscall.EWOULDBLOCK:
		return probeClean, nil
	case p.err != nil:
		return probeStale, p.err
	case p.n == 0:
		return probeStale, errPeerClosed
	case !p.layered:
		return probeStale, errUnsolicited
	}
	nc.SetReadDeadline(time.Now().Add(layerProbeWait))
	n, err := nc.Read(p.buf[:])
	nc.SetReadDeadline(time.Time{})
	switch {
	case n > 0:
		return probeStale, errUnsolicited
	case isTimeout(err):
		return probeCleanOfLayer, nil
	case err != nil:
		return probeStale, err
	}
	return probeCleanOfLayer, nil // (0, nil): a Read that consumed only the layer's records
}
