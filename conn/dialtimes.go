package conn

import (
	"time"
)

// dialTimes adds up the parts of one dial (for telemetry: Dialed.Connect,
// Dialed.TLS): the TCP connects (to the target, or to the proxy; name
// resolution included) and the TLS handshakes. It is used by the dial
// goroutine only; its methods do nothing on a nil *dialTimes.
type dialTimes struct {
	connect, tls time.Duration
}

func (d *dialTimes) now() time.Time {
	if d == nil {
		return time.Time{}
	}
	return time.Now()
}

func (d *dialTimes) addConnect(start time.Time) {
	if d != nil {
		d.connect += time.Since(start)
	}
}

func (d *dialTimes) addTLS(start time.Time) {
	if d != nil {
		d.tls += time.Since(start)
	}
}
