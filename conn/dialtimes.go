package conn

import (
	"context"
	"crypto/tls"
	"net/http/httptrace"
	"time"
)

// dialTimes measures the parts of one dial through the httptrace hooks that
// dial and handshake call (for telemetry: Dialed.Connect, Dialed.TLS). It is
// used by the dial goroutine only.
type dialTimes struct {
	connectStart, tlsStart time.Time
	connect, tls           time.Duration
}

func (d *dialTimes) context(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		ConnectStart: func(string, string) { d.connectStart = time.Now() },
		ConnectDone: func(string, string, error) {
			if !d.connectStart.IsZero() {
				d.connect += time.Since(d.connectStart)
			}
		},
		TLSHandshakeStart: func() { d.tlsStart = time.Now() },
		TLSHandshakeDone: func(tls.ConnectionState, error) {
			if !d.tlsStart.IsZero() {
				d.tls += time.Since(d.tlsStart)
			}
		},
	})
}
