package mailbox

import (
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/connactor/connactor/internal/testkit/footprint"
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
	m := New(3)
	inv := &countingInvoker{}
	m.RegisterHandlers(inv, nil)
	// Queue 10 messages while suspended, then let one sender resume the
	// mailbox and run it.
	m.PostSystemMessage(&actor.SuspendMailbox{})
	for i := 0; i < 10; i++ {
		m.PostUserMessage(i)
	}
	if n := m.UserMessageCount(); n != 10 {
		t.Fatalf("%d messages queued while suspended, want 10", n)
	}
	me := goid()
	m.PostSystemMessage(&actor.ResumeMailbox{})
	inline := 0
	for _, g := range inv.goroutines() {
		if g == me {
			inline++
		}
	}
	if inline != 3 {
		t.Fatalf("%d messages ran on the sender's goroutine, budget 3", inline)
	}
	deadline := time.Now().Add(5 * time.Second)
	for m.UserMessageCount() > 0 || m.isRunning() {
		if time.Now().After(deadline) {
			t.Fatal("backlog not drained by a goroutine")
		}
		time.Sleep(time.Millisecond)
	}
	if got := inv.users(); !slices.Equal(got, []any{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("processed %v", got)
	}
}

func (m *Mailbox) isRunning() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running
}

// countingInvoker records the messages it is given, in order, and on which
// goroutine; a user message equal to panicOn panics once.
type countingInvoker struct {
	mu        sync.Mutex
	on        []uint64
	seen      []any
	panicOn   any
	escalated []any
	m         *Mailbox // posts SuspendMailbox on a failure, as protoactor's actors do
}

func (c *countingInvoker) InvokeSystemMessage(msg any) {
	c.mu.Lock()
	c.seen = append(c.seen, msg)
	c.mu.Unlock()
}

func (c *countingInvoker) InvokeUserMessage(msg any) {
	c.mu.Lock()
	c.on = append(c.on, goid())
	c.seen = append(c.seen, msg)
	boom := c.panicOn != nil && msg == c.panicOn
	if boom {
		c.panicOn = nil
	}
	c.mu.Unlock()
	if boom {
		panic("boom")
	}
}

func (c *countingInvoker) EscalateFailure(_ any, msg any) {
	c.mu.Lock()
	c.escalated = append(c.escalated, msg)
	c.mu.Unlock()
	if c.m != nil {
		c.m.PostSystemMessage(&actor.SuspendMailbox{})
	}
}

func (c *countingInvoker) goroutines() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.on)
}

// users returns the user messages seen (ints), in order.
func (c *countingInvoker) users() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []any
	for _, m := range c.seen {
		if _, ok := m.(int); ok {
			out = append(out, m)
		}
	}
	return out
}

func (c *countingInvoker) all() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.seen)
}

type sysMsg struct{ n int }

// A runner that took a batch of user messages in one lock round still runs a
// system message that arrives meanwhile before the rest of the batch.
func TestASystemMessageOvertakesTheRestOfABatch(t *testing.T) {
	m := New(100)
	inv := &countingInvoker{}
	m.RegisterHandlers(inv, nil)
	m.PostSystemMessage(&actor.SuspendMailbox{})
	for i := 0; i < 20; i++ {
		m.PostUserMessage(i)
	}
	// Resume on a runner that stops after the batch's first message: the
	// batch (16) is taken, 15 of it left; then a system message arrives.
	m.mu.Lock()
	m.system.push(&actor.ResumeMailbox{})
	m.nsys.Add(1)
	m.running = true
	m.mu.Unlock()
	if n, idle := m.process(nil, 1); n != 1 || idle {
		t.Fatalf("process = %d, %v", n, idle)
	}
	if len(m.batch)-m.at != batchMax-1 {
		t.Fatalf("%d messages left in the batch, want %d", len(m.batch)-m.at, batchMax-1)
	}
	m.PostSystemMessage(&sysMsg{1}) // queued: the mailbox is running
	m.run(nil, -1)
	want := []any{0, &sysMsg{1}}
	for i := 1; i < 20; i++ {
		want = append(want, i)
	}
	got := inv.all()
	if len(got) != len(want) {
		t.Fatalf("processed %v", got)
	}
	for i := range got {
		if s, ok := got[i].(*sysMsg); ok {
			if w, ok := want[i].(*sysMsg); !ok || w.n != s.n {
				t.Fatalf("processed %v, want %v", got, want)
			}
		} else if got[i] != want[i] {
			t.Fatalf("processed %v, want %v", got, want)
		}
	}
}

// A message that panics is escalated, the mailbox suspends (the escalation's
// SuspendMailbox comes next), and after ResumeMailbox the messages that were
// behind it, in its batch or queued, run in order.
func TestAFailureKeepsTheMessagesBehindItInOrder(t *testing.T) {
	m := New(100)
	inv := &countingInvoker{panicOn: 5, m: m}
	m.RegisterHandlers(inv, nil)
	m.PostSystemMessage(&actor.SuspendMailbox{})
	for i := 0; i < 30; i++ {
		m.PostUserMessage(i)
	}
	m.PostSystemMessage(&actor.ResumeMailbox{})
	if got := inv.users(); len(got) != 6 || len(inv.escalated) != 1 || inv.escalated[0] != 5 {
		t.Fatalf("before the resume: processed %v, escalated %v", got, inv.escalated)
	}
	if n := m.UserMessageCount(); n != 24 {
		t.Fatalf("%d messages wait after the failure, want 24", n)
	}
	m.PostUserMessage(30) // queued behind the others while suspended
	m.PostSystemMessage(&actor.ResumeMailbox{})
	var want []any
	for i := 0; i <= 30; i++ {
		want = append(want, i)
	}
	if got := inv.users(); !slices.Equal(got, want) {
		t.Fatalf("processed %v", got)
	}
}

// closeable is a message that can be answered when its actor is gone.
type closeable struct{ answered *atomic.Int32 }

func (c closeable) Undelivered() { c.answered.Add(1) }

// Close answers the messages still queued and every one posted afterwards,
// exactly once each, while other goroutines post; the ones processed before
// are not answered.
func TestCloseAnswersQueuedAndLaterMessagesExactlyOnce(t *testing.T) {
	m := New(1)
	var processed atomic.Int32
	inv := &closingInvoker{m: m, processed: &processed, closed: make(chan struct{})}
	m.RegisterHandlers(inv, nil)
	var answered atomic.Int32
	const posters, each = 8, 500
	var wg sync.WaitGroup
	for p := 0; p < posters; p++ {
		wg.Go(func() {
			for i := 0; i < each; i++ {
				if p == 0 && i == each/2 {
					m.PostUserMessage(closeNow{})
				}
				m.PostUserMessage(closeable{&answered})
			}
		})
	}
	wg.Wait()
	<-inv.closed                            // what was queued before closeNow ran before it, in order
	m.PostUserMessage(closeable{&answered}) // after the close
	if got := processed.Load() + answered.Load(); got != posters*each+1 {
		t.Fatalf("%d processed + %d answered = %d, want %d", processed.Load(), answered.Load(), got, posters*each+1)
	}
	if answered.Load() == 0 {
		t.Fatal("nothing answered after the close")
	}
	m.Close() // again: nothing more
	if got := processed.Load() + answered.Load(); got != posters*each+1 {
		t.Fatalf("a second Close answered again: %d", got)
	}
}

type closeNow struct{}

// closingInvoker counts the closeables it processes and closes its mailbox
// when it gets closeNow, as an actor does on Stopped.
type closingInvoker struct {
	m         *Mailbox
	processed *atomic.Int32
	closed    chan struct{}
}

func (c *closingInvoker) InvokeSystemMessage(any) {}
func (c *closingInvoker) InvokeUserMessage(msg any) {
	switch msg.(type) {
	case closeNow:
		c.m.Close()
		close(c.closed)
	case closeable:
		c.processed.Add(1)
	}
}
func (c *closingInvoker) EscalateFailure(any, any) {}

// A sender whose message used the whole budget hands nothing to a goroutine
// when nothing is left: a budget of 1 (the connection actors') runs each
// message on its sender's goroutine and starts none.
func TestASpentBudgetStartsNoGoroutineWhenNothingIsLeft(t *testing.T) {
	m := New(1)
	inv := &countingInvoker{}
	m.RegisterHandlers(inv, nil)
	me := goid()
	for i := 0; i < 100; i++ {
		m.PostUserMessage(i)
		if m.isRunning() {
			t.Fatalf("message %d: the mailbox is still running after its sender's post returned", i)
		}
	}
	for i, g := range inv.goroutines() {
		if g != me {
			t.Fatalf("message %d ran on goroutine %d, not its sender's", i, g)
		}
	}
}

// payload is a message big enough to have an allocation of its own (the
// runtime packs smaller pointer-free values together, and a weak pointer to
// one of them says nothing of the others).
type payload struct{ b [64]byte }

// heldInvoker blocks on its first user message until release closes, and
// keeps nothing of the messages it is given.
type heldInvoker struct {
	entered, release chan struct{}
	first            sync.Once
	processed        atomic.Int32
}

func (h *heldInvoker) InvokeSystemMessage(any) {}
func (h *heldInvoker) InvokeUserMessage(any) {
	h.first.Do(func() {
		close(h.entered)
		<-h.release
	})
	h.processed.Add(1)
}
func (h *heldInvoker) EscalateFailure(any, any) {}

// Messages that queued while the actor was busy, more of them than the
// queue's inline places, are not kept by the mailbox once processed: the
// places the queue grew out of held the first two of them, and kept them
// (and whatever they point to: a caller's ticket, a PID and the actor it
// caches) for as long as the mailbox lived.
func TestAMailboxKeepsNoMessageItProcessedAfterItsQueueGrew(t *testing.T) {
	m := New(8)
	inv := &heldInvoker{entered: make(chan struct{}), release: make(chan struct{})}
	m.RegisterHandlers(inv, nil)
	done := make(chan struct{})
	go func() { // owned by the test: ends once the queue is processed
		defer close(done)
		m.PostUserMessage(&payload{}) // runs here, and blocks
	}()
	<-inv.entered
	const queued = 5 // more than the two inline places: the queue grows
	weaks := postWeakly(m, queued)
	close(inv.release)
	<-done
	if got := inv.processed.Load(); got != queued+1 {
		t.Fatalf("%d messages processed, want %d", got, queued+1)
	}
	kept := footprint.Kept(weaks)
	runtime.KeepAlive(m) // the mailbox lives on, as its actor's does
	if kept > 0 {
		t.Fatalf("%d of the %d processed messages are still reachable: the mailbox keeps them", kept, queued)
	}
}

// postWeakly posts n new messages to m and returns weak pointers to them
// (in a function of its own: no pointer to them stays on the test's stack).
func postWeakly(m *Mailbox, n int) []weak.Pointer[payload] {
	weaks := make([]weak.Pointer[payload], n)
	for i := range weaks {
		msg := &payload{}
		weaks[i] = weak.Make(msg)
		m.PostUserMessage(msg)
	}
	return weaks
}
