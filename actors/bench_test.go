package actors

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/testkit/footprint"
	"github.com/connactor/connactor/internal/wait"
)

// Micro-benchmarks of the route actor, driven by its messages as the client
// pool drives it (LeaseRequest answered through its ticket, Released),
// under the real supervisor, with connections dialed over net.Pipe (the pool
// fixture of fixture_test.go):
//
//	go test -run '^$' -bench . -benchmem ./actors
//
// Lease+release on an idle route, alone and with 64 goroutines; whether its
// cost grows with the number of routes or of waiters (queued on another route,
// or queued on the same route and served through); memory per route actor and
// per idle connection.

// op is one lease+release as the pool makes it: one allocation holds
// the ticket and both messages, none changed after it is sent.
type op struct {
	ticket wait.Ticket[Lease]
	req    LeaseRequest
	rel    Released
}

// leaseRelease is one uncontended lease+release on h, as the pool does
// it (the release is asynchronous: the next lease queues behind it).
func leaseRelease(b *testing.B, p *pool, h *routeHandle) {
	leaseReleaseVia(b, p, h, false)
}

// leaseReleaseVia is leaseRelease, trying the route's outbox first when
// outbox is set, as Call.Lease does.
func leaseReleaseVia(b *testing.B, p *pool, h *routeHandle, outbox bool) {
	if outbox {
		if l, ok := h.take(time.Now()); ok {
			p.release(h, true, l)
			return
		}
	}
	o := &op{}
	o.req.Ticket = &o.ticket
	p.sys.Root.Send(h.PID, &o.req)
	l, err := leased(b, &o.ticket)
	if err != nil {
		b.Fatal(err)
	}
	o.rel = Released{ConnID: l.ConnID, Reusable: true}
	p.sys.Root.Send(h.PID, &o.rel)
}

// BenchmarkLeaseRelease: lease+release on a route with an idle connection.
// uncontended/routes=N: one caller while N routes exist (the measured one
// included); uncontended/otherRouteWaiters=100000: while another route holds
// 100,000 queued waiters; parallel64/conns=C: 64 callers on one route with C
// idle connections (with 16, callers queue); chanpool/conns=C: the same 64
// callers taking and putting back C tokens of a buffered channel, what a pool
// without actors (connbench's pool+std) pays for the same, to compare;
// outbox/callers=N/conns=C: N callers on C idle connections, each taking an
// offer from the route's outbox first, as the pool's leases do
// (offered/lease: the share of leases that took one).
func BenchmarkLeaseRelease(b *testing.B) {
	for _, routes := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprintf("uncontended/routes=%d", routes), func(b *testing.B) {
			p := newPool(b, 1, routes)
			for i := 1; i < routes; i++ {
				p.route(hostN(i))
			}
			h := p.idleRoute(hostN(0), 1)
			b.ReportAllocs()
			for b.Loop() {
				leaseRelease(b, p, h)
			}
		})
	}
	b.Run("uncontended/otherRouteWaiters=100000", func(b *testing.B) {
		const waiters = 100_000
		p := newPool(b, 1, 2)
		h := p.idleRoute(hostN(0), 1)
		other := p.route(hostN(1))
		// The other route's one connection stays leased; its waiters are
		// answered when the route stops.
		p.lease(other, 1)
		for i := 0; i < waiters; i++ {
			p.ask(other)
		}
		eventually(b, "waiters queued", func() bool { return other.Pub.Pending.Load() == waiters })
		b.ReportAllocs()
		for b.Loop() {
			leaseRelease(b, p, h)
		}
		if got := other.Pub.Pending.Load(); got != waiters {
			b.Fatalf("the other route has %d waiters, want %d", got, waiters)
		}
	})
	for _, conns := range []int{64, 16} {
		b.Run(fmt.Sprintf("parallel64/conns=%d", conns), func(b *testing.B) {
			p := newPool(b, conns, conns)
			h := p.idleRoute(hostN(0), conns)
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					leaseRelease(b, p, h)
				}
			})
		})
	}
	for _, c := range []struct{ callers, conns int }{{1, 1}, {16, 16}, {64, 64}, {64, 16}} {
		b.Run(fmt.Sprintf("outbox/callers=%d/conns=%d", c.callers, c.conns), func(b *testing.B) {
			p := newPool(b, c.conns, c.conns)
			h := p.idleRoute(hostN(0), c.conns)
			leaseReleaseFrom(b, p, h, c.callers, true)
		})
	}
	for _, conns := range []int{64, 16} {
		b.Run(fmt.Sprintf("chanpool/conns=%d", conns), func(b *testing.B) {
			pool := make(chan *int, conns)
			for range conns {
				pool <- new(int)
			}
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c := <-pool
					*c++ // the holder touches what it leased
					pool <- c
				}
			})
			total := 0
			for range conns {
				total += *<-pool
			}
			if total != b.N {
				b.Fatalf("%d leases counted, want %d", total, b.N)
			}
		})
	}
}

// BenchmarkServeThroughQueue: a route with one connection, always leased, and
// Q waiters queued. One op: the holder releases, the route grants the
// connection to the oldest waiter, and a new waiter joins the tail, so the
// queue stays Q long. Flat ns/op from Q=1 to Q=100,000 means the route's cost
// per lease does not grow with its queue.
func BenchmarkServeThroughQueue(b *testing.B) {
	for _, q := range []int{1, 1000, 100_000} {
		b.Run(fmt.Sprintf("queue=%d", q), func(b *testing.B) {
			p := newPool(b, 1, 1)
			h := p.route(hostN(0))
			held := p.lease(h, 1)[0]
			queue := make([]*wait.Ticket[Lease], 0, q)
			for i := 0; i < q; i++ {
				queue = append(queue, p.ask(h))
			}
			b.ReportAllocs()
			for b.Loop() {
				p.release(h, true, held)
				queue = append(queue, p.ask(h))
				held = p.leased(queue[0])
				queue = queue[1:]
			}
			if got := h.Pub.Pending.Load(); got != int32(q) {
				b.Fatalf("%d waiters queued after the run, want %d", got, q)
			}
		})
	}
}

// liveHeap returns the live heap and the stacks in use after a full GC.
func liveHeap() (heap, stack uint64) { return footprint.Live() }

// BenchmarkRouteActorMemory: each op starts one more route actor (a
// RouteRequest for a new route: the supervisor spawns it and answers);
// B/route is the live heap it adds (actor, mailbox, process registry entry,
// the supervisor's entries). ns/op is the cost of starting a route.
func BenchmarkRouteActorMemory(b *testing.B) {
	p := newPool(b, 1, 1)
	p.route("first") // the first spawn allocates the system's shared structures
	heap0, _ := liveHeap()
	n := 0
	for b.Loop() {
		p.route(hostN(n))
		n++
	}
	heap1, _ := liveHeap()
	b.ReportMetric(float64(int64(heap1)-int64(heap0))/float64(n), "B/route")
}

// BenchmarkIdleConnMemory: each op opens one more connection on one route
// (lease: permit from the supervisor, connection actor, dial over net.Pipe);
// after the loop all are released and idle, each with its idle watch running.
// B/conn is the live heap each idle connection holds (connection actor, its
// 4 KiB bufio reader and writer, the route's record, the net.Pipe pair),
// stack-B/conn the stack of its idle-watch goroutine. ns/op is the cost of
// opening a connection over a pipe.
func BenchmarkIdleConnMemory(b *testing.B) {
	p := newPool(b, 1<<30, 1<<30)
	h := p.route(hostN(0))
	p.lease(h, 1) // the first connection allocates shared structures; it stays leased
	heap0, stack0 := liveHeap()
	var held []Lease
	for b.Loop() {
		held = append(held, p.lease(h, 1)...)
	}
	b.StopTimer()
	n := len(held)
	p.release(h, true, held...)
	eventually(b, "idle connections published", func() bool { return h.Pub.Idle.Load() == int32(n) })
	held = nil
	heap1, stack1 := liveHeap()
	b.ReportMetric(float64(int64(heap1)-int64(heap0))/float64(n), "B/conn")
	b.ReportMetric(float64(int64(stack1)-int64(stack0))/float64(n), "stack-B/conn")
}

// BenchmarkLRUIdleRoute: the supervisor's search for the route with the least
// recently used idle connection, run for every eviction under MaxConnsTotal,
// among R routes of which H hold connections, all of them idle ones. It is a
// pass over the routes holding connections (one atomic load each): ns/op
// grows with H, not with R (a crawler's routes, used once, hold nothing).
func BenchmarkLRUIdleRoute(b *testing.B) {
	for _, c := range []struct{ routes, holding int }{{200, 200}, {10_000, 10_000}, {100_000, 12_000}} {
		b.Run(fmt.Sprintf("routes=%d/holding=%d", c.routes, c.holding), func(b *testing.B) {
			s := NewSupervisor(&SupervisorConfig{})().(*Supervisor)
			for i := range c.routes {
				pub := &routePublished{}
				e := entryN(i, pub)
				s.addRoute(e)
				if i%(c.routes/c.holding) == 0 && len(s.holding) < c.holding {
					pub.LRUIdleSince.Store(int64(1_000_000 + (i*7919)%c.routes)) // distinct, not in route order
					e.held = 1
					s.holdChanged(e)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				if s.lruIdleRoute("") == nil {
					b.Fatal("no route found")
				}
			}
		})
	}
}
