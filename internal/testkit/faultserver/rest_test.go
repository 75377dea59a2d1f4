package faultserver

import (
	"context"
	"net"
	"testing"
	"time"
)

func TestSettleReportsRestOnlyWhenSocketsMatchIdle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := NewDialer()
	nc, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	// One socket open, the pool says one idle: at rest.
	r, ok := Settle(func() (int, int, int) { return 0, 0, 1 }, d, time.Second)
	if !ok || r != (Rest{Idle: 1, Sockets: 1}) {
		t.Fatalf("Settle = %+v, %v; want at rest with 1 idle and 1 socket", r, ok)
	}
	// One socket open for nothing idle: not at rest, reported as found.
	r, ok = Settle(func() (int, int, int) { return 1, 0, 0 }, d, 20*time.Millisecond)
	if ok || r != (Rest{Leased: 1, Sockets: 1}) {
		t.Fatalf("Settle = %+v, %v; want not at rest with 1 leased and 1 socket", r, ok)
	}
}

func TestWaitBaselineComesBackWhenNothingWasLeft(t *testing.T) {
	base := Measure()
	base.Goroutines++ // room for a runtime goroutine that comes and goes
	if now, ok := WaitBaseline(base, time.Second); !ok {
		t.Fatalf("WaitBaseline: %+v, not back to %+v", now, base)
	}
	// A baseline no process can meet is reported as missed, with the measure.
	if now, ok := WaitBaseline(Resources{FDs: -2, Goroutines: 0}, 20*time.Millisecond); ok || now.Goroutines == 0 {
		t.Fatalf("WaitBaseline of an impossible baseline = %+v, %v", now, ok)
	}
}
