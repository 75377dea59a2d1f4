package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/internal/mailbox"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// The package's tests build one of three things, each with one constructor:
//   - newPool: the actors (supervisor, routes, connections on net.Pipe),
//     driven by their messages (this file);
//   - newTestPool: a Pool, driven through its API as the client drives it,
//     against loopback servers (pool_test.go);
//   - newSupHarness and newFleetHarness: the supervisor alone, with fake
//     routes (supervisor_test.go, supervisor_fleet_test.go).
//
// What a test waits for comes as an event where there is one (a ticket, a
// message, a faultserver's count); eventually polls what has none.

var quiet = slog.New(slog.DiscardHandler)

// pool is a supervisor with real route and connection actors whose
// connections are net.Pipe ends, dialed through conn.Options.DialContext: no
// listener and no network. The far ends are held and never written, so an
// idle watch blocks until the connection closes. Tests drive the actors with
// their messages, as the pool does.
type pool struct {
	tb     testing.TB
	sys    *actor.ActorSystem
	sup    *actor.PID
	supMB  *mailbox.Mailbox
	wg     sync.WaitGroup // dials and idle watches of the connection actors
	cancel context.CancelFunc

	mu      sync.Mutex
	peers   []net.Conn
	forget  bool // peers are not kept (benchmarks that dial millions of times)
	dials   int
	refuse  map[string]error // host -> dial error
	dialGap chan struct{}    // when set, each dial waits for a value
}

type poolOpt func(*SupervisorConfig)

func newPool(tb testing.TB, maxPerRoute, maxTotal int, opts ...poolOpt) *pool {
	tb.Helper()
	p := &pool{tb: tb, refuse: map[string]error{}, supMB: mailbox.New(SupervisorInlineBudget)}
	life, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	sv := NewSupervision(quiet)
	cfg := &SupervisorConfig{
		Route: &RouteConfig{
			MaxConnsPerRoute: maxPerRoute, MaxIdleTime: time.Minute,
			Conn: &conn.Options{DialTimeout: 10 * time.Second, MaxResponseHeaderBytes: 1 << 20,
				DialContext: p.dial, Go: p.goOwned, Logger: quiet},
			Life: life, Logger: quiet, Now: time.Now, Supervision: sv,
		},
		MaxConnsTotal: maxTotal,
		Go:            p.goOwned,
		Logger:        quiet,
		Mailbox:       p.supMB,
	}
	for _, o := range opts {
		o(cfg)
	}
	p.sup = p.sys.Root.Spawn(actor.PropsFromProducer(NewSupervisor(cfg), actor.WithMailbox(p.supMB.Producer()),
		actor.WithSupervisor(sv.Route), actor.WithGuardian(SupervisorStrategy)))
	tb.Cleanup(p.close)
	return p
}

func (p *pool) goOwned(f func()) {
	p.wg.Add(1)
	go func() { // owned by the pool's WaitGroup
		defer p.wg.Done()
		f()
	}()
}

func (p *pool) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	p.mu.Lock()
	gap, err := p.dialGap, p.refuse[host]
	p.dials++
	p.mu.Unlock()
	if gap != nil {
		select {
		case <-gap:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	c, peer := net.Pipe()
	p.mu.Lock()
	if !p.forget {
		p.peers = append(p.peers, peer)
	}
	p.mu.Unlock()
	return c, nil
}

func (p *pool) dialCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dials
}

func (p *pool) close() {
	if err := p.sys.Root.StopFuture(p.sup).Wait(); err != nil {
		p.tb.Errorf("supervisor did not stop: %v", err)
	}
	p.cancel()
	p.mu.Lock()
	for _, c := range p.peers {
		c.Close()
	}
	if p.dialGap != nil {
		close(p.dialGap)
		p.dialGap = nil
	}
	p.mu.Unlock()
	p.wg.Wait()
	p.sys.Shutdown()
}

// route returns the route actor of host name, starting it.
func (p *pool) route(name string) *routeHandle {
	p.tb.Helper()
	t := &wait.Ticket[*routeHandle]{}
	p.sys.Root.Send(p.sup, &RouteRequest{Key: route.Key{Scheme: "http", Host: name, Port: "80"}, Ticket: t})
	h, err := result(p.tb, t)
	if err != nil {
		p.tb.Fatal(err)
	}
	return h
}

// ask sends a LeaseRequest to h and returns its ticket.
func (p *pool) ask(h *routeHandle) *wait.Ticket[Lease] {
	t := &wait.Ticket[Lease]{}
	p.sys.Root.Send(h.PID, &LeaseRequest{Ticket: t})
	return t
}

// leased waits for t to be delivered.
func (p *pool) leased(t *wait.Ticket[Lease]) Lease {
	p.tb.Helper()
	l, err := result(p.tb, t)
	if err != nil {
		p.tb.Fatalf("lease refused: %v", err)
	}
	return l
}

// lease asks n leases of h and waits for them.
func (p *pool) lease(h *routeHandle, n int) []Lease {
	p.tb.Helper()
	ts := make([]*wait.Ticket[Lease], n)
	for i := range ts {
		ts[i] = p.ask(h)
	}
	out := make([]Lease, n)
	for i, t := range ts {
		out[i] = p.leased(t)
	}
	return out
}

func (p *pool) release(h *routeHandle, reusable bool, ls ...Lease) {
	for _, l := range ls {
		p.sys.Root.Send(h.PID, &Released{ConnID: l.ConnID, Reusable: reusable})
	}
}

func (p *pool) stats(h *routeHandle) routeReport {
	p.tb.Helper()
	t := &wait.Ticket[routeReport]{}
	p.sys.Root.Send(h.PID, &RouteStatsRequest{Ticket: t})
	r, _ := result(p.tb, t)
	return r
}

func (p *pool) supStats() StatsResponse {
	p.tb.Helper()
	t := &wait.Ticket[StatsResponse]{}
	p.sys.Root.Send(p.sup, &StatsRequest{Ticket: t})
	r, _ := result(p.tb, t)
	return r
}

// idleRoute starts route name with n idle connections.
func (p *pool) idleRoute(name string, n int) *routeHandle {
	p.tb.Helper()
	h := p.route(name)
	p.release(h, true, p.lease(h, n)...)
	eventually(p.tb, "idle connections published", func() bool { return h.Pub.Idle.Load() == int32(n) })
	return h
}

// result waits (at most 10s) for a ticket's outcome.
func result[T any](tb testing.TB, t *wait.Ticket[T]) (T, error) {
	tb.Helper()
	select {
	case <-t.Ready():
	case <-time.After(10 * time.Second):
		tb.Fatal("ticket not answered in 10s")
	}
	v, err, ok := t.Result()
	if !ok {
		tb.Fatal("ticket cancelled")
	}
	return v, err
}

// waiting reports whether t is still undecided after the actors have handled
// everything sent so far (a stats round trip through the route orders it).
func (p *pool) waiting(h *routeHandle, t *wait.Ticket[Lease]) bool {
	p.stats(h)
	return !t.Done()
}

// eventually polls cond for what a test waits on but cannot observe as an
// event (published counters); it fails after 10s.
func eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("not %s within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

var errRefused = errors.New("dial refused (test)")

func hostN(i int) string { return fmt.Sprintf("r%d.test", i) }

// entryN is the supervisor's entry for a route hostN(i) with no actor behind
// it, for tests of the supervisor's own bookkeeping (addRoute, its passes).
func entryN(i int, pub *routePublished) *routeEntry {
	return &routeEntry{h: &routeHandle{Key: route.Key{Scheme: "http", Host: hostN(i), Port: "80"},
		PID: actor.NewPID("nowhere", hostN(i)), Pub: pub}}
}

func timeAfter10s() <-chan time.Time { return time.After(10 * time.Second) }

// take takes an offer from h's outbox, as a caller's lease tries first;
// false when the outbox is empty.
func (p *pool) take(h *routeHandle) (Lease, bool) { return h.take(time.Now()) }

// offers waits until h's outbox holds n offers (the route refills it after
// the message that made connections idle).
func (p *pool) offers(h *routeHandle, n int) {
	p.tb.Helper()
	p.stats(h) // everything sent so far is handled
	if got := len(h.outbox); got != n {
		p.tb.Fatalf("%d offers in the outbox, want %d", got, n)
	}
}
