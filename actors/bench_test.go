package actors

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
)

// Micro-benchmarks of the route actor, driven by its messages as the client
// front door drives it (LeaseRequest with a buffered reply channel, Release),
// under the real supervisor, with connections dialed over net.Pipe:
//
//	go test -run '^$' -bench . -benchmem ./actors
//
// Lease+release on an idle route, alone and with 64 goroutines; whether its
// cost grows with the number of routes or of waiters (queued on another route,
// or queued on the same route and served through); memory per route actor and
// per idle connection. A caller here re-uses its reply channel: what is
// measured is the route's side (two sends and a reply), not the channel's
// allocation.

// routeBench is a supervisor with its routes, whose connections are net.Pipe
// ends: the far ends are held, never read, so an idle watch blocks until the
// connection closes.
type routeBench struct {
	sys    *actor.ActorSystem
	sup    *actor.PID
	wg     sync.WaitGroup // dials and idle watches of the connection actors
	cancel context.CancelFunc
	ids    atomic.Uint64 // lease ids, unique per fixture

	mu    sync.Mutex
	peers []net.Conn // the server ends of the pipes
}

func newRouteBench(tb testing.TB, maxPerRoute, maxTotal int) *routeBench {
	tb.Helper()
	f := &routeBench{}
	logger := slog.New(slog.DiscardHandler)
	life, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	pub := &SupervisorPublished{}
	cfg := &SupervisorConfig{
		Route: &RouteConfig{
			MaxConnsPerRoute: maxPerRoute,
			Conn: &conn.Options{DialTimeout: 10 * time.Second, MaxResponseHeaderBytes: 1 << 20,
				DialContext: f.dial, Go: f.wg.Go, Logger: logger},
			Life: life, Logger: logger, Now: time.Now, Sup: pub,
		},
		MaxConnsTotal:         maxTotal,
		MaxConcurrentRequests: 1 << 20,
		Pub:                   pub,
		Go:                    f.wg.Go,
		Logger:                logger,
	}
	f.sup = f.sys.Root.Spawn(actor.PropsFromProducer(NewSupervisor(cfg), actor.WithSupervisor(RouteStrategy)))
	tb.Cleanup(f.close)
	return f
}

func (f *routeBench) dial(context.Context, string, string) (net.Conn, error) {
	c, peer := net.Pipe()
	f.mu.Lock()
	f.peers = append(f.peers, peer)
	f.mu.Unlock()
	return c, nil
}

func (f *routeBench) close() {
	if err := f.sys.Root.StopFuture(f.sup).Wait(); err != nil {
		panic("actors bench: supervisor did not stop: " + err.Error())
	}
	f.cancel()
	f.mu.Lock()
	for _, p := range f.peers {
		p.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	f.sys.Shutdown()
}

// route returns the route actor of a benchmark route named i, starting it.
func (f *routeBench) route(tb testing.TB, i int) *RouteHandle {
	tb.Helper()
	reply := make(chan RouteResponse, 1)
	f.sys.Root.Send(f.sup, &RouteRequest{Key: route.Key{Scheme: "http", Host: fmt.Sprintf("r%d.bench", i), Port: "80"}, Reply: reply})
	r := <-reply
	if r.Err != nil {
		tb.Fatal(r.Err)
	}
	return r.Route
}

// lease sends n LeaseRequests to h and waits for their n grants.
func (f *routeBench) lease(tb testing.TB, h *RouteHandle, n int) []Lease {
	tb.Helper()
	reply := make(chan LeaseResponse, n)
	for i := 0; i < n; i++ {
		f.sys.Root.Send(h.PID, &LeaseRequest{ID: f.ids.Add(1), Reply: reply})
	}
	out := make([]Lease, 0, n)
	timeout := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case r := <-reply:
			if r.Err != nil {
				tb.Fatal(r.Err)
			}
			out = append(out, r.Lease)
		case <-timeout:
			tb.Fatalf("%d of %d leases granted in 30s", len(out), n)
		}
	}
	return out
}

func (f *routeBench) release(h *RouteHandle, ls []Lease) {
	for _, l := range ls {
		f.sys.Root.Send(h.PID, &Release{ConnID: l.ConnID, Reusable: true})
	}
}

// idleRoute starts route i with n idle connections.
func (f *routeBench) idleRoute(tb testing.TB, i, n int) *RouteHandle {
	tb.Helper()
	h := f.route(tb, i)
	f.release(h, f.lease(tb, h, n))
	waitPublished(tb, func() bool { return h.Pub.Idle.Load() == int32(n) })
	return h
}

// queue parks n waiters on route h, whose connections are all leased; their
// replies go to replies[id % len(replies)], and ids follow first.
func (f *routeBench) queue(tb testing.TB, h *RouteHandle, first uint64, n int, replies []chan LeaseResponse) {
	tb.Helper()
	before := h.Pub.Pending.Load()
	for i := 0; i < n; i++ {
		id := first + uint64(i)
		f.sys.Root.Send(h.PID, &LeaseRequest{ID: id, Reply: replies[id%uint64(len(replies))]})
	}
	waitPublished(tb, func() bool { return h.Pub.Pending.Load() == before+int32(n) })
}

func waitPublished(tb testing.TB, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatal("route did not publish the expected state in 30s")
		}
		time.Sleep(time.Millisecond)
	}
}

// leaseRelease is one uncontended lease+release on h, as the front door does
// it (the release is asynchronous: the next lease queues behind it).
func (f *routeBench) leaseRelease(b *testing.B, h *RouteHandle, reply chan LeaseResponse) {
	f.sys.Root.Send(h.PID, &LeaseRequest{ID: f.ids.Add(1), Reply: reply})
	r := <-reply
	if r.Err != nil {
		b.Fatal(r.Err)
	}
	f.sys.Root.Send(h.PID, &Release{ConnID: r.Lease.ConnID, Reusable: true})
}

// BenchmarkLeaseRelease: lease+release on a route with an idle connection.
// uncontended/routes=N: one caller while N routes exist (the measured one
// included); uncontended/otherRouteWaiters=100000: while another route holds
// 100,000 queued waiters; parallel64/conns=C: 64 callers on one route with C
// idle connections (with 16, callers queue).
func BenchmarkLeaseRelease(b *testing.B) {
	for _, routes := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprintf("uncontended/routes=%d", routes), func(b *testing.B) {
			f := newRouteBench(b, 1, routes)
			for i := 1; i < routes; i++ {
				f.route(b, i)
			}
			h := f.idleRoute(b, 0, 1)
			reply := make(chan LeaseResponse, 1)
			b.ReportAllocs()
			for b.Loop() {
				f.leaseRelease(b, h, reply)
			}
		})
	}
	b.Run("uncontended/otherRouteWaiters=100000", func(b *testing.B) {
		const waiters = 100_000
		f := newRouteBench(b, 1, 2)
		h := f.idleRoute(b, 0, 1)
		other := f.route(b, 1)
		// The other route's one connection stays leased; its waiters are
		// answered when the route stops.
		f.lease(b, other, 1)
		replies := make([]chan LeaseResponse, waiters)
		for i := range replies {
			replies[i] = make(chan LeaseResponse, 1)
		}
		f.queue(b, other, 1<<40, waiters, replies)
		reply := make(chan LeaseResponse, 1)
		b.ReportAllocs()
		for b.Loop() {
			f.leaseRelease(b, h, reply)
		}
		if got := other.Pub.Pending.Load(); got != waiters {
			b.Fatalf("the other route has %d waiters, want %d", got, waiters)
		}
	})
	for _, conns := range []int{64, 16} {
		b.Run(fmt.Sprintf("parallel64/conns=%d", conns), func(b *testing.B) {
			f := newRouteBench(b, conns, conns)
			h := f.idleRoute(b, 0, conns)
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				reply := make(chan LeaseResponse, 1)
				for pb.Next() {
					f.sys.Root.Send(h.PID, &LeaseRequest{ID: f.ids.Add(1), Reply: reply})
					r := <-reply
					if r.Err != nil {
						b.Error(r.Err)
						return
					}
					f.sys.Root.Send(h.PID, &Release{ConnID: r.Lease.ConnID, Reusable: true})
				}
			})
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
			f := newRouteBench(b, 1, 1)
			h := f.route(b, 0)
			conn := f.lease(b, h, 1)[0].ConnID
			// Waiter j answers on slot j % (q+1): by the time waiter j+q+1 is
			// queued on that slot, waiter j's grant has been read.
			slots := make([]chan LeaseResponse, q+1)
			for i := range slots {
				slots[i] = make(chan LeaseResponse, 1)
			}
			f.queue(b, h, 0, q, slots)
			head, next := uint64(0), uint64(q)
			b.ReportAllocs()
			for b.Loop() {
				f.sys.Root.Send(h.PID, &Release{ConnID: conn, Reusable: true})
				f.sys.Root.Send(h.PID, &LeaseRequest{ID: next, Reply: slots[next%uint64(q+1)]})
				next++
				r := <-slots[head%uint64(q+1)]
				head++
				if r.Err != nil || r.Lease.ConnID != conn {
					b.Fatalf("waiter %d: %+v", head-1, r)
				}
			}
			if got := h.Pub.Pending.Load(); got != int32(q) {
				b.Fatalf("%d waiters queued after the run, want %d", got, q)
			}
		})
	}
}

// liveHeap returns the live heap and the stacks in use after a full GC.
func liveHeap() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

// BenchmarkRouteActorMemory: each op starts one more route actor (a
// RouteRequest for a new route: the supervisor spawns it and answers);
// B/route is the live heap it adds (actor, mailbox, process registry entry,
// the supervisor's entries). ns/op is the cost of starting a route.
func BenchmarkRouteActorMemory(b *testing.B) {
	f := newRouteBench(b, 1, 1)
	f.route(b, -1) // the first spawn allocates the system's shared structures
	heap0, _ := liveHeap()
	n := 0
	for b.Loop() {
		f.route(b, n)
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
	f := newRouteBench(b, 1<<30, 1<<30)
	h := f.route(b, 0)
	f.lease(b, h, 1) // the first connection allocates shared structures; it stays leased
	heap0, stack0 := liveHeap()
	var held []Lease
	for b.Loop() {
		held = append(held, f.lease(b, h, 1)...)
	}
	b.StopTimer()
	n := len(held)
	f.release(h, held)
	waitPublished(b, func() bool { return h.Pub.Idle.Load() == int32(n) })
	held = nil
	heap1, stack1 := liveHeap()
	b.ReportMetric(float64(int64(heap1)-int64(heap0))/float64(n), "B/conn")
	b.ReportMetric(float64(int64(stack1)-int64(stack0))/float64(n), "stack-B/conn")
}
