package client

import (
	"net/http"
	"sync/atomic"
	"testing"
)

// Through a real squid (CONNECT, basic authentication) to nginx's HTTP/2
// origin: the client speaks TLS with ALPN inside the tunnel, nginx picks h2,
// and one tunnel carries the streams of every request.
func TestSquidTunnelsHTTP2ToNginxOnOneConnection(t *testing.T) {
	const requests, callers = 500, 32
	sq := startSquid(t, "alice", "s3cret")
	ng := startNginxH2(t, 1000000)
	var dials atomic.Int32
	c := nginxH2Client(t, ng, &dials, Config{Proxy: http.ProxyURL(sq.withUser("alice", "s3cret"))})
	if failed := h2Load(t, c, ng.URL, requests, callers, true); failed > 0 {
		t.Fatalf("%d of %d requests through squid failed", failed, requests)
	}
	st := waitSettled(t, c)
	conns := accessLog(t, ng, requests)
	t.Logf("%d requests (half POSTs) from %d callers through squid: %d dials to squid, %d nginx connections, route %s",
		requests, callers, dials.Load(), len(conns), st.Routes[0].Route)
	if dials.Load() != 1 || len(conns) != 1 || st.Open != 1 {
		t.Errorf("%d dials to squid, %d nginx connections, %d open: want one tunnel carrying every stream",
			dials.Load(), len(conns), st.Open)
	}
}
