package actors

import (
	"net"
	"testing"

	"github.com/connactor/connactor/internal/wait"
)

// BenchmarkDial: what a new connection costs the pool beyond the connect
// itself, driven as the pool drives it. One op: a LeaseRequest that
// finds no idle connection, the route's permit round with the supervisor, a
// connection actor spawned, its dial (net.Pipe through DialContext: no
// network), Dialed, the grant; then a Released that is not reusable, which
// stops the connection actor and frees its place (ConnClosed).
//
//   - fresh: the supervisor has room (MaxConnsTotal not reached);
//   - evicting: the total is reached and the room comes from another route's
//     idle connection (EvictIdleRequest), routes200's pattern;
//   - pipe: net.Pipe and its close alone, the "raw connect" to subtract.
//
// The target: fresh minus pipe at most 5 us. Besides ns/op (wall
// time, which a busy machine stretches: the op hands its dial to a worker
// goroutine and waits), each reports cpu-ns/op, the CPU time the whole
// process spent per op (both goroutines, the GC), which other processes on
// the machine disturb less.
//
// The harness costs little of its own: the pool forgets the far ends of its
// pipes (keeping one per op made the GC scan a growing heap), and an op waits
// for its lease on the ticket alone (no timer per op, as leaseRelease).
func BenchmarkDial(b *testing.B) {
	b.Run("fresh", func(b *testing.B) {
		p := newPool(b, 1, 1)
		p.forget = true
		h := p.route(hostN(0))
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			dialOnce(b, p, h, false)
		}
	})
	b.Run("evicting", func(b *testing.B) {
		// Two routes, room for one connection: each op's dial first evicts
		// the other route's idle connection; the other route then gets its
		// connection back the same way, so both alternate.
		p := newPool(b, 1, 1)
		p.forget = true
		hs := [2]*routeHandle{p.route(hostN(0)), p.route(hostN(1))}
		b.ReportAllocs()
		defer reportCPU(b)()
		i := 0
		for b.Loop() {
			dialOnce(b, p, hs[i%2], true) // stays idle: the next op evicts it
			i++
		}
	})
	b.Run("pipe", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			c, s := net.Pipe()
			c.Close()
			s.Close()
		}
	})
}

// dialOnce leases a new connection of h (which has none idle) and releases it,
// reusable (it stays idle) or not (it closes).
func dialOnce(b *testing.B, p *pool, h *routeHandle, reusable bool) {
	o := &op{}
	o.req.Ticket = &o.ticket
	p.sys.Root.Send(h.PID, &o.req)
	l, err := leased(b, &o.ticket)
	if err != nil {
		b.Fatal(err)
	}
	if l.Reused {
		b.Fatal("leased a re-used connection; want a new one")
	}
	o.rel = Released{ConnID: l.ConnID, Reusable: reusable}
	p.sys.Root.Send(h.PID, &o.rel)
}

// leased waits for a benchmark op's lease on its ticket alone (a test's
// result adds a 10 s timer per op; a benchmark that hangs is stopped by go
// test's -timeout instead).
func leased(b *testing.B, t *wait.Ticket[Lease]) (Lease, error) {
	if _, _, ok := t.Result(); !ok {
		<-t.Ready()
	}
	l, err, ok := t.Result()
	if !ok {
		b.Fatal("ticket cancelled")
	}
	return l, err
}

// reportCPU starts measuring the process's CPU time; the function it returns
// reports it per op as cpu-ns/op (nothing where it cannot be read).
func reportCPU(b *testing.B) func() {
	start, ok := cpuTime()
	return func() {
		end, ok2 := cpuTime()
		if ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// reportUsage starts measuring the process's CPU time and context switches;
// the function it returns reports them per op as cpu-ns/op and ctxsw/op
// (nothing where they cannot be read).
func reportUsage(b *testing.B) func() {
	cpu0, sw0, ok := usage()
	return func() {
		cpu1, sw1, ok2 := usage()
		if ok && ok2 && b.N > 0 {
			b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(sw1-sw0)/float64(b.N), "ctxsw/op")
		}
	}
}
