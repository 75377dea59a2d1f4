package telemetry

import (
	"net/netip"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// A connection's metrics (opened, closed, dial errors and durations, its
// duration) carry the address it went to as network.peer.address and
// network.peer.port, beside the route's server.address: a route spreads its
// connections over the addresses its host resolves to, and a dashboard shows
// how they spread and which address fails. Through a proxy, the peer is the
// proxy.

// peerKey keys a cached measurement option: the peer (zero: none) and the
// value of the one attribute added.
type peerKey struct {
	peer netip.AddrPort
	v    string
}

// peerAttrs are the route's attributes plus a peer's.
type peerAttrs struct {
	kv  []attribute.KeyValue
	set attribute.Set
	opt metric.MeasurementOption
}

// peer returns the route's attributes plus peer's, built once per peer; the
// route's own for the zero peer.
func (r *Route) peer(peer netip.AddrPort) *peerAttrs {
	if v, ok := r.byPeer.Load(peer); ok {
		return v.(*peerAttrs)
	}
	kv := r.kv
	if peer.IsValid() {
		kv = append(kv[:len(kv):len(kv)], semconv.NetworkPeerAddress(peer.Addr().String()),
			semconv.NetworkPeerPort(int(peer.Port())))
	}
	p := &peerAttrs{kv: kv, set: attribute.NewSet(kv...)}
	p.opt = metric.WithAttributeSet(p.set)
	v, _ := r.byPeer.LoadOrStore(peer, p)
	return v.(*peerAttrs)
}
