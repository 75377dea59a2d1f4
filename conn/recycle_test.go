package conn

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/internal/mailbox"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

// recycleFixture runs one connection actor, dialed to a local listener that
// answers every request with a short response, under a parent that forwards
// what the actor reports. The test holds the *Actor to look at its fields
// between messages.
type recycleFixture struct {
	sys      *actor.ActorSystem
	a        *Actor
	pid      *actor.PID
	ln       net.Listener
	life     context.Context
	dialed   chan *Dialed
	recycled chan *Recycled
	broken   chan *IdleBroken
	gone     chan *actor.PID
	wg       sync.WaitGroup
}

func newRecycleFixture(t *testing.T) *recycleFixture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &recycleFixture{ln: ln, dialed: make(chan *Dialed, 1), recycled: make(chan *Recycled, 1),
		broken: make(chan *IdleBroken, 4), gone: make(chan *actor.PID, 1)}
	var servers []net.Conn
	var mu sync.Mutex
	f.wg.Add(1)
	go func() { // owned by f.wg: ends when the listener closes
		defer f.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			servers = append(servers, nc)
			mu.Unlock()
			f.wg.Add(1)
			go func() { // owned by f.wg: ends when the connection closes
				defer f.wg.Done()
				br := bufio.NewReader(nc)
				for {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}()
		}
	}()
	opt := &Options{DialTimeout: 5 * time.Second, MaxResponseHeaderBytes: 1 << 20,
		Go: func(fn func()) {
			f.wg.Add(1)
			go func() { // owned by f.wg, waited for in cleanup
				defer f.wg.Done()
				fn()
			}()
		},
		Logger: slog.New(slog.DiscardHandler)}
	life, cancel := context.WithCancel(context.Background())
	f.life = life
	f.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return opt.Logger }))
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	key := route.Key{Scheme: "http", Host: host, Port: port}
	spawned := make(chan *actor.PID, 1)
	parent := f.sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			mb := mailbox.New(inlineBudget)
			spawned <- ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
				f.a = &Actor{id: 1, key: key, addr: key.Addr(), opt: opt, life: life, mb: mb}
				return f.a
			}, actor.WithMailbox(mb.Producer())))
		case *Dialed:
			f.dialed <- m
		case *Recycled:
			f.recycled <- m
		case *IdleBroken:
			f.broken <- m
		case *actor.Terminated:
			f.gone <- m.Who
		}
	}))
	f.pid = <-spawned
	t.Cleanup(func() {
		f.sys.Root.StopFuture(parent).Wait()
		cancel()
		ln.Close()
		mu.Lock()
		for _, nc := range servers {
			nc.Close()
		}
		mu.Unlock()
		f.wg.Wait()
		f.sys.Shutdown()
	})
	return f
}

func (f *recycleFixture) waitDialed(t *testing.T, id uint64) *Dialed {
	t.Helper()
	select {
	case d := <-f.dialed:
		if d.Err != nil || d.ID != id {
			t.Fatalf("Dialed %d, %v; want %d, no error", d.ID, d.Err, id)
		}
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no Dialed in 10s")
	}
	return nil
}

// waitWatcher waits for the actor's idle watcher to start and returns how
// long since armed (taken before the WatchIdle that armed it was sent).
func (f *recycleFixture) waitWatcher(t *testing.T, armed time.Time) time.Duration {
	t.Helper()
	deadline := armed.Add(10 * time.Second)
	for f.a.watch.Load()&watchStates != watchRunning { // the test reads the atomic only
		if time.Now().After(deadline) {
			t.Fatalf("the idle watcher did not start in 10s (watch state %d)", f.a.watch.Load()&watchStates)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(armed)
}

// recycle aborts d's socket, as the route's closeConn does, and has the
// actor recycled.
func (f *recycleFixture) recycle(t *testing.T, d *Dialed) {
	t.Helper()
	CloseNow(d.NetConn)
	f.sys.Root.Send(f.pid, &RecycleRequest{})
	select {
	case m := <-f.recycled:
		if m.PID.Id != f.pid.Id {
			t.Fatalf("Recycled from %s, want %s", m.PID.Id, f.pid.Id)
		}
	case who := <-f.gone:
		t.Fatalf("the actor stopped (%s) instead of recycling", who.Id)
	case <-time.After(10 * time.Second):
		t.Fatal("no Recycled in 10s")
	}
}

// get runs one GET on the actor's connection id; read says whether the body
// is read to its end.
func (f *recycleFixture) get(t *testing.T, id uint64, reused, read bool) (ExchangeResponse, chan bool) {
	t.Helper()
	r, done := f.send(t, id, reused)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if read {
		io.Copy(io.Discard, r.Resp.Body)
		r.Resp.Body.Close()
		if !<-done {
			t.Fatal("a complete exchange was not reusable")
		}
	}
	return r, done
}

// send sends one GET for the actor's connection id and returns its answer.
func (f *recycleFixture) send(t *testing.T, id uint64, reused bool) (ExchangeResponse, chan bool) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://example.test/", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	reply := &wait.Ticket[ExchangeResponse]{}
	f.sys.Root.Send(f.pid, &ExchangeRequest{ConnID: id, Req: req, Reused: reused, Reply: reply,
		Done: EnderFunc(func(reusable bool, _ time.Duration) { done <- reusable })})
	select {
	case <-reply.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the exchange in 10s")
	}
	r, _, _ := reply.Result()
	return r, done
}

// recycleKeeps are the fields of Actor a recycled actor keeps: they belong to
// the actor, not to one socket. Every other field must be zero after a
// recycle: a field added to Actor must be reset in resetSocket, or listed here
// with the reason it may outlive its socket.
var recycleKeeps = map[string]bool{
	"key": true, "addr": true, "opt": true, // the route's
	"sys": true, "self": true, "parent": true, "mb": true, "recycled": true, // the actor's place
	"watchTimer": true, "watchDone": true, "watchSet": true, // reused across sockets as across idle periods
	"watch": true,                                  // its idle periods go on counting across sockets; its state is checked
	"lent":  true, "dialed": true, "stopped": true, // atomics, checked by value
}

// A connection actor recycled after its connection closed keeps nothing of
// that socket, and serves the next socket of its route like a new actor.
func TestRecycledConnectionActorKeepsNothingOfItsSocket(t *testing.T) {
	f := newRecycleFixture(t)
	first := f.waitDialed(t, 1)
	f.get(t, 1, false, true)
	f.get(t, 1, true, true)
	f.sys.Root.Send(f.pid, &WatchIdle{})
	f.recycle(t, first)
	v := reflect.ValueOf(f.a).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if !recycleKeeps[name] && !v.Field(i).IsZero() {
			t.Errorf("field %s of a recycled actor is not reset", name)
		}
	}
	if f.a.lent.Load() != 0 || f.a.dialed.Load() != nil || f.a.stopped.Load() || f.a.watch.Load()&watchStates != watchOff {
		t.Errorf("recycled actor: lent %d, dialed %v, stopped %v, watch %d; want 0, nil, false, off",
			f.a.lent.Load(), f.a.dialed.Load(), f.a.stopped.Load(), f.a.watch.Load()&watchStates)
	}

	f.sys.Root.Send(f.pid, &DialRequest{ID: 2, Life: f.life})
	second := f.waitDialed(t, 2)
	if second.NetConn == first.NetConn {
		t.Fatal("the recycled actor kept its old socket")
	}
	// An exchange meant for the first connection (a holder that kept its
	// lease past the close) is refused, not written to the second socket.
	if r, _ := f.send(t, 1, true); !errors.Is(r.Err, ErrStaleConn) || !errors.Is(r.Err, ErrNotSent) {
		t.Fatalf("exchange for the closed connection 1 on the actor of connection 2: %v; want ErrStaleConn and ErrNotSent", r.Err)
	}
	if r, _ := f.get(t, 2, false, true); r.Resp.StatusCode != 200 {
		t.Fatalf("status %d on the new socket", r.Resp.StatusCode)
	}
	if r, _ := f.get(t, 2, true, true); r.Resp.StatusCode != 200 {
		t.Fatalf("status %d on the new socket's second request (the refused exchange left it out of step?)", r.Resp.StatusCode)
	}
	if _, err := first.NetConn.Read(make([]byte, 1)); err == nil {
		t.Fatal("the first socket is still open")
	}
}

// A recycle that comes while the idle watcher is blocked in its peek (the
// watch delay has passed): dropSocket closes the socket, which ends the peek,
// and waits for the watcher before the buffers go back and the fields are
// reset. The watcher's report names the old socket, never the new one, and
// the new socket is in step.
func TestRecycleWaitsForARunningIdleWatcher(t *testing.T) {
	f := newRecycleFixture(t)
	first := f.waitDialed(t, 1)
	f.get(t, 1, false, true)
	f.sys.Root.Send(f.pid, &WatchIdle{})
	f.waitWatcher(t, time.Now())
	f.recycle(t, first)
	if st := f.a.watch.Load() & watchStates; st != watchOff {
		t.Fatalf("watch state %d after the recycle, want off", st)
	}
	f.sys.Root.Send(f.pid, &DialRequest{ID: 2, Life: f.life})
	f.waitDialed(t, 2)
	for i := range 3 {
		if r, _ := f.get(t, 2, i > 0, true); r.Resp.StatusCode != 200 {
			t.Fatalf("request %d on the new socket: status %d", i, r.Resp.StatusCode)
		}
	}
	for len(f.broken) > 0 { // whatever the watchers reported so far
		if m := <-f.broken; m.ID != 1 {
			t.Fatalf("IdleBroken for connection %d (%v): the old watcher reported against the new socket", m.ID, m.Err)
		}
	}
}

// A lease that has to interrupt a running idle watcher doubles the socket's
// watch delay, up to MaxIdleWatchDelay; a lease that comes before the watch
// looks leaves it; a recycled actor's next socket starts again at
// IdleWatchDelay.
func TestInterruptedIdleWatchesBackOff(t *testing.T) {
	f := newRecycleFixture(t)
	first := f.waitDialed(t, 1)
	f.get(t, 1, false, true)
	want := IdleWatchDelay
	for want < MaxIdleWatchDelay { // 10 ms to 1 s: about 2.3 s of watches
		armed := time.Now() // before the timer is armed: a timer never fires early
		f.sys.Root.Send(f.pid, &WatchIdle{})
		if waited := f.waitWatcher(t, armed); waited < want {
			t.Fatalf("the watch looked after %v, want at least its delay %v", waited, want)
		}
		f.get(t, 1, true, true) // interrupts the watcher
		want = min(2*want, MaxIdleWatchDelay)
		if got := time.Duration(f.a.watchDelay.Load()); got != want {
			t.Fatalf("watch delay %v after an interrupted watch, want %v", got, want)
		}
	}
	f.sys.Root.Send(f.pid, &WatchIdle{}) // a lease before the watch looks, and at the cap: no change
	f.get(t, 1, true, true)
	if got := time.Duration(f.a.watchDelay.Load()); got != MaxIdleWatchDelay {
		t.Fatalf("watch delay %v after a lease that beat the watch, want the cap %v", got, MaxIdleWatchDelay)
	}
	f.recycle(t, first)
	f.sys.Root.Send(f.pid, &DialRequest{ID: 2, Life: f.life})
	f.waitDialed(t, 2)
	f.get(t, 2, false, true)
	f.sys.Root.Send(f.pid, &WatchIdle{})
	f.waitWatcher(t, time.Now())
	if got := time.Duration(f.a.watchDelay.Load()); got != IdleWatchDelay {
		t.Errorf("the new socket's watch delay is %v, want %v", got, IdleWatchDelay)
	}
}

// A lease that comes before the watch is due leaves the timer set; when the
// connection goes idle again, that timer fires at the first period's due time,
// finds the second period not seen yet, marks it and sets itself again: the
// watcher starts no earlier than a full delay into the second idle period.
func TestIdleWatchTimerSetsItselfAgainForTheCurrentIdlePeriod(t *testing.T) {
	f := newRecycleFixture(t)
	f.waitDialed(t, 1)
	f.get(t, 1, false, true)
	f.sys.Root.Send(f.pid, &WatchIdle{}) // first idle period: the timer is set
	f.get(t, 1, true, true)              // leased before the watch is due: the timer stays set
	time.Sleep(IdleWatchDelay / 2)
	armed := time.Now() // before the second period's due time is stored
	f.sys.Root.Send(f.pid, &WatchIdle{})
	if waited := f.waitWatcher(t, armed); waited < IdleWatchDelay {
		t.Fatalf("the watch looked %v into the second idle period, want at least %v", waited, IdleWatchDelay)
	}
	f.get(t, 1, true, true) // the watcher is interrupted; the connection stays in step
}

// A timer firing that finds the connection leased since it was set was a
// goroutine for nothing: the socket's watch delay doubles, as for an
// interrupted watcher, and the next idle period is watched that much later.
func TestIdleWatchTimerFiringOnALeasedConnectionBacksOff(t *testing.T) {
	f := newRecycleFixture(t)
	f.waitDialed(t, 1)
	f.get(t, 1, false, true)
	f.sys.Root.Send(f.pid, &WatchIdle{}) // the timer is set
	r, done := f.send(t, 1, true)        // leased before the watch is due, and held
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Duration(f.a.watchDelay.Load()) != 2*IdleWatchDelay { // the test reads the atomic only
		if time.Now().After(deadline) {
			t.Fatalf("watch delay %v 10s after the timer was due, want %v", time.Duration(f.a.watchDelay.Load()), 2*IdleWatchDelay)
		}
		time.Sleep(time.Millisecond)
	}
	io.Copy(io.Discard, r.Resp.Body)
	r.Resp.Body.Close()
	if !<-done {
		t.Fatal("a complete exchange was not reusable")
	}
	armed := time.Now()
	f.sys.Root.Send(f.pid, &WatchIdle{})
	if waited := f.waitWatcher(t, armed); waited < 2*IdleWatchDelay {
		t.Fatalf("the watch looked %v into the idle period, want at least %v", waited, 2*IdleWatchDelay)
	}
	f.get(t, 1, true, true) // the watcher is interrupted; the connection stays in step
}

// The timer's firings race with leases and releases (its delay kept shorter
// than an exchange, so that it fires in every phase of the cycle: while
// leased, idle but unseen, seen, watching): every exchange finds the
// connection in step, no interrupted watcher reports the connection broken,
// the idle period after them is watched, and the actor stops with no watcher
// left (goleak).
func TestIdleWatchTimerRacingLeasesKeepsTheConnectionInStep(t *testing.T) {
	f := newRecycleFixture(t)
	f.waitDialed(t, 1)
	f.get(t, 1, false, true)
	for range 2000 {
		f.a.watchDelay.Store(int64(20 * time.Microsecond)) // no back-off: the firings keep racing
		f.sys.Root.Send(f.pid, &WatchIdle{})
		f.get(t, 1, true, true)
	}
	// Whatever state the races left the timer in, the next idle period is
	// watched.
	f.sys.Root.Send(f.pid, &WatchIdle{})
	f.waitWatcher(t, time.Now())
	f.get(t, 1, true, true)
	if len(f.broken) > 0 {
		m := <-f.broken
		t.Fatalf("IdleBroken for connection %d (%v) while the server kept it open", m.ID, m.Err)
	}
}

// A connection actor whose buffers are still lent (a response body nobody has
// read or closed) cannot be recycled: it stops instead.
func TestConnectionActorWithALentBodyStopsInsteadOfRecycling(t *testing.T) {
	f := newRecycleFixture(t)
	d := f.waitDialed(t, 1)
	r, _ := f.get(t, 1, false, false) // the body holds the connection's reader
	CloseNow(d.NetConn)               // as the route's closeConn does
	f.sys.Root.Send(f.pid, &RecycleRequest{})
	select {
	case who := <-f.gone:
		if who.Id != f.pid.Id {
			t.Fatalf("Terminated of %s, want %s", who.Id, f.pid.Id)
		}
	case m := <-f.recycled:
		t.Fatalf("recycled (%v) while its body was lent", m.PID)
	case <-time.After(10 * time.Second):
		t.Fatal("the actor neither stopped nor answered in 10s")
	}
	r.Resp.Body.Close()
}

// BenchmarkSpareActorMemory measures what a spare connection actor (recycled,
// without a socket: see actors' spareConns) keeps on the heap: the actor, and
// protoactor's process, mailbox, context and registry entry. Each round spawns
// 2,000 connection actors whose dials fail at once, recycles them, and
// reports the live heap they add, per actor (B/spare), their PIDs and
// registry entries included.
func BenchmarkSpareActorMemory(b *testing.B) {
	const n = 2000
	key := route.Key{Scheme: "http", Host: "spare.test", Port: "80"}
	var perSpare float64
	for b.Loop() {
		var workers sync.WaitGroup
		opt := &Options{DialTimeout: time.Second, MaxResponseHeaderBytes: 1 << 20,
			DialContext: func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("no dial (benchmark)") },
			Go:          func(fn func()) { workers.Go(fn) }, // dial workers, waited for at the end of the round
			Logger:      slog.New(slog.NewTextHandler(io.Discard, nil))}
		life, cancel := context.WithCancel(context.Background())
		sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return opt.Logger }))
		failed, recycled := make(chan struct{}, n), make(chan struct{}, n)
		kids := make([]*actor.PID, 0, n) // as a route's spares slice holds them
		spawned := make(chan struct{})
		parent := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			switch ctx.Message().(type) {
			case spawnChildren:
				for i := range n {
					kids = append(kids, ctx.Spawn(Props(uint64(i+1), key, opt, life)))
				}
				close(spawned)
			case *Dialed:
				failed <- struct{}{}
			case *Recycled:
				recycled <- struct{}{}
			}
		}))
		baseline := liveHeap()
		sys.Root.Send(parent, spawnChildren{})
		<-spawned
		for range n {
			<-failed
		}
		for _, pid := range kids {
			sys.Root.Send(pid, &RecycleRequest{})
		}
		for range n {
			<-recycled
		}
		perSpare = (float64(liveHeap()) - float64(baseline)) / n
		sys.Root.StopFuture(parent).Wait()
		cancel()
		workers.Wait()
		sys.Shutdown()
	}
	b.ReportMetric(perSpare, "B/spare")
}

// spawnChildren makes BenchmarkSpareActorMemory's parent spawn its
// connection actors.
type spawnChildren struct{}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
