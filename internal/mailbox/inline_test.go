package mailbox

import (
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

// recorder notes, per message, the goroutine that processed it.
type recorder struct {
	mu      sync.Mutex
	order   []int
	on      []uint64
	block   chan struct{} // a message with n < 0 waits on it
	entered chan struct{} // closed when that message starts
}

type numbered struct{ n int }

func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	var id uint64
	for _, c := range b[len("goroutine "):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

func (r *recorder) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*numbered); ok {
		if m.n < 0 {
			close(r.entered)
			<-r.block
		}
		r.mu.Lock()
		r.order = append(r.order, m.n)
		r.on = append(r.on, goid())
		r.mu.Unlock()
	}
}

func newMailboxSystem(t *testing.T) *actor.ActorSystem {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(sys.Shutdown)
	return sys
}

func TestInlineRunsAMessageToAnIdleActorOnTheSendersGoroutine(t *testing.T) {
	sys := newMailboxSystem(t)
	r := &recorder{}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }, actor.WithMailbox(Inline(4))))
	defer func() { sys.Root.StopFuture(pid).Wait() }()
	me := goid()
	for i := 0; i < 3; i++ {
		sys.Root.Send(pid, &numbered{i})
		r.mu.Lock()
		if len(r.order) != i+1 || r.on[i] != me {
			r.mu.Unlock()
			t.Fatalf("message %d not processed inline when Send returned (order %v)", i, r.order)
		}
		r.mu.Unlock()
	}
}

func TestInlineKeepsOrderAndHandsABacklogToAGoroutine(t *testing.T) {
	sys := newMailboxSystem(t)
	r := &recorder{block: make(chan struct{}), entered: make(chan struct{})}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r }, actor.WithMailbox(Inline(2))))
	defer func() { sys.Root.StopFuture(pid).Wait() }()
	// The first message blocks the actor on another goroutine, so a backlog builds.
	go sys.Root.Send(pid, &numbered{-1}) // runs inline on that goroutine and blocks it
	<-r.entered
	waitFor := time.Now().Add(5 * time.Second)
	mb := 0
	for i := 0; i < 50; i++ {
		sys.Root.Send(pid, &numbered{i}) // running elsewhere: only queued, never blocks
		mb++
	}
	close(r.block)
	for {
		r.mu.Lock()
		n := len(r.order)
		r.mu.Unlock()
		if n == mb+1 {
			break
		}
		if time.Now().After(waitFor) {
			t.Fatalf("processed %d of %d messages", n, mb+1)
		}
		time.Sleep(time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.order[0] != -1 {
		t.Fatalf("order %v", r.order)
	}
	for i, n := range r.order[1:] {
		if n != i {
			t.Fatalf("order %v", r.order)
		}
	}
}

func TestInlineBoundsTheWorkDoneOnASendersGoroutine(t *testing.T) {
	var m inlineMailbox
	m.budget = 3
	inv := &countingInvoker{}
	m.RegisterHandlers(inv, nil)
	// Queue 10 messages without scheduling, then let one sender run the mailbox.
	m.mu.Lock()
	for i := 0; i < 10; i++ {
		m.user.push(i)
	}
	m.mu.Unlock()
	me := goid()
	m.schedule()
	inv.mu.Lock()
	inline := 0
	for _, g := range inv.on {
		if g == me {
			inline++
		}
	}
	inv.mu.Unlock()
	if inline != 3 {
		t.Fatalf("%d messages ran on the sender's goroutine, budget 3", inline)
	}
	deadline := time.Now().Add(5 * time.Second)
	for m.UserMessageCount() > 0 || m.status.Load() != mailboxIdle {
		if time.Now().After(deadline) {
			t.Fatal("backlog not drained by a goroutine")
		}
		time.Sleep(time.Millisecond)
	}
}

type countingInvoker struct {
	mu sync.Mutex
	on []uint64
}

func (c *countingInvoker) InvokeSystemMessage(any) {}
func (c *countingInvoker) InvokeUserMessage(any) {
	c.mu.Lock()
	c.on = append(c.on, goid())
	c.mu.Unlock()
}
func (c *countingInvoker) EscalateFailure(any, any) {}
