// Package mailbox holds the inline-first mailbox of connactor's actors: the
// supervisor, the route actors (actors/) and the connection actors (conn/)
// use it instead of protoactor's default mailbox, which starts a goroutine
// per wake-up and allocates per message.
package mailbox

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Mailbox processes a message sent to an idle actor at once on the sender's
// goroutine, up to budget messages; whatever is left is handed to a new
// goroutine, as protoactor's default mailbox does for every message. It
// allocates nothing per message (the queue is a ring that grows in bursts
// only).
//
// The point is the request path: a caller that leases from an idle route, or
// sends its exchange to an idle connection, has its answer when Send returns,
// with no goroutine started or switched to (protoactor's default mailbox
// starts one per wake-up, ~2 us, measured with protoactor-go's pinned
// version). protoactor's synchronized dispatcher would do the same but drains
// the mailbox to empty on the sender's goroutine, so under load one caller
// could be kept serving everybody else's messages indefinitely, and its
// default mailbox costs two allocations per message (the queue node and the
// scheduled method value); the budget bounds the work done for others to a
// few messages.
//
// An actor whose Receive blocks (a connection actor doing its exchange's I/O)
// blocks only the sender whose message it processes, and, while it does,
// messages sent to it queue and are processed after it, on that goroutine, up
// to budget: a sender also waits for the others' messages that queued behind
// its own, which a budget of 1 rules out (the connection actors').
//
// One lock guards the queues and whether a goroutine runs the mailbox, so
// that a message to an idle actor costs one lock round to claim the mailbox
// (the message itself is never queued) and one to give it up, and no atomic
// besides. A runner that finds several user messages queued takes up to
// batchMax of them in one lock round: under contention, posters and the
// runner meet on the lock once per batch, not once per message.
//
// A mailbox can be closed (Close) by its actor once the actor has stopped:
// the user messages still queued, and every one posted afterwards, are then
// answered (Undeliverable) instead of being dropped, as protoactor drops the
// messages of a stopped actor. Whoever holds the mailbox (the one who made
// it, and those it gave it to) can thus post a request and count on an
// answer, without also waiting on a channel that says the actor stopped.
//
// Order is that of the default mailbox: system messages first, user messages
// in arrival order, one at a time. Safe for concurrent use.
type Mailbox struct {
	mu        sync.Mutex
	user      msgRing // under mu
	system    msgRing // under mu
	running   bool    // under mu: a goroutine runs the mailbox (posters only queue)
	suspended bool    // under mu, written by the runner: user messages wait (SuspendMailbox)
	closed    bool    // under mu: user messages are answered, not delivered (Close)
	// nsys counts the system messages queued, so that the runner of a batch
	// sees one arrive without taking the lock.
	nsys atomic.Int32

	invoker actor.MessageInvoker
	budget  int

	// batch holds user messages the runner took from user in one lock round,
	// not yet processed (batch[at:]): they stay first in line. Touched only by
	// the goroutine that runs the mailbox (running), which is handed over
	// under mu.
	batch    []any
	at       int
	batchBuf [batchMax]any
	// batched is len(batch)-at, stored by the runner, for UserMessageCount.
	batched atomic.Int32
}

// batchMax is how many user messages a runner takes from the queue in one
// lock round.
const batchMax = 16

// Undeliverable is a message that can be answered when its actor has stopped
// (see Mailbox.Close): Undelivered answers its sender (rejects the ticket it
// carries, say). It is called once, on the goroutine that closed the mailbox
// or that posted the message, and must not block. Other messages are dropped.
type Undeliverable interface {
	Undelivered()
}

// New returns an idle mailbox that runs up to budget messages on a sender's
// goroutine (at least 1). Give it to exactly one actor (Producer).
func New(budget int) *Mailbox {
	return &Mailbox{budget: max(budget, 1)}
}

// Producer returns a producer that gives m to the actor spawned with it
// (actor.WithMailbox). A restarted actor keeps its mailbox; another actor
// must not be spawned with it.
func (m *Mailbox) Producer() actor.MailboxProducer {
	return func() actor.Mailbox { return m }
}

// Inline returns a producer of a new Mailbox per actor, for actors whose
// mailbox nobody closes or posts to but through their PID.
func Inline(budget int) actor.MailboxProducer {
	return func() actor.Mailbox { return New(budget) }
}

// PostUserMessage queues msg, and runs the mailbox on this goroutine if it was
// idle. On a closed mailbox it answers msg instead (Undeliverable).
func (m *Mailbox) PostUserMessage(msg any) {
	m.mu.Lock()
	switch {
	case m.closed:
		m.mu.Unlock()
		undelivered(msg)
		return
	case m.running || m.suspended:
		m.user.push(msg)
		m.mu.Unlock()
		return
	}
	// Idle and not suspended: nothing is queued (a runner gives the mailbox
	// up only when it finds nothing it may process), so msg is next.
	m.running = true
	m.mu.Unlock()
	m.run(msg, m.budget)
}

// PostSystemMessage queues msg, and runs the mailbox on this goroutine if it
// was idle.
func (m *Mailbox) PostSystemMessage(msg any) {
	m.mu.Lock()
	m.system.push(msg)
	m.nsys.Add(1)
	if m.running {
		m.mu.Unlock()
		return
	}
	m.running = true
	m.mu.Unlock()
	m.run(nil, m.budget)
}

// RegisterHandlers is protoactor's: the actor's invoker.
func (m *Mailbox) RegisterHandlers(invoker actor.MessageInvoker, _ actor.Dispatcher) {
	m.invoker = invoker
}

// Start is protoactor's: nothing to start.
func (m *Mailbox) Start() {}

// UserMessageCount returns the number of user messages waiting.
func (m *Mailbox) UserMessageCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.user.len() + int(m.batched.Load())
}

// Close answers every user message still queued (Undeliverable) and makes
// every later PostUserMessage answer its message at once; system messages are
// still processed. Its actor calls it from its Receive (on the goroutine
// that runs the mailbox), once it has stopped: for protoactor's actors, on
// *actor.Stopped. Calling it again does nothing.
func (m *Mailbox) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	left := make([]any, 0, len(m.batch)-m.at+m.user.len())
	left = append(left, m.batch[m.at:]...)
	m.dropBatch()
	for m.user.len() > 0 {
		left = append(left, m.user.pop())
	}
	m.mu.Unlock()
	for _, msg := range left {
		undelivered(msg)
	}
}

// undelivered answers msg if it can be (Undeliverable), looking inside
// protoactor's envelope.
func undelivered(msg any) {
	if u, ok := actor.UnwrapEnvelopeMessage(msg).(Undeliverable); ok {
		u.Undelivered()
	}
}

// run processes messages on this goroutine, first (a user message that was
// never queued; nil = none) first, until nothing is left or limit messages
// were processed (limit < 0: no limit), when it hands the rest to a goroutine
// of the mailbox's.
func (m *Mailbox) run(first any, limit int) {
	for {
		n, idle := m.process(first, limit)
		if idle {
			return
		}
		first = nil
		if limit < 0 {
			continue // a failure interrupted the run: go on
		}
		if limit -= n; limit <= 0 {
			go m.run(nil, -1) // owned by the mailbox: ends when the queues are empty
			return
		}
	}
}

// process runs messages until the queues are empty (idle: the mailbox was
// given up) or limit were processed with more left. A panic in the actor is
// escalated to its supervisor, as in the default mailbox, and ends the call
// (not idle): the SuspendMailbox that the escalation posts comes next.
func (m *Mailbox) process(first any, limit int) (n int, idle bool) {
	msg := first
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
			idle = false
		}
	}()
	if msg != nil {
		n++
		m.invoker.InvokeUserMessage(msg)
	}
	for limit < 0 || n < limit {
		if limit < 0 && n > 0 && n%300 == 0 {
			runtime.Gosched()
		}
		var system bool
		if msg, system = m.next(); msg == nil {
			return n, true
		}
		n++
		if system {
			m.invoker.InvokeSystemMessage(msg)
		} else {
			m.invoker.InvokeUserMessage(msg)
		}
	}
	return n, m.giveUpIfDone()
}

// giveUpIfDone gives the mailbox up if nothing is left that it may process,
// and reports whether it did: a runner whose budget is spent hands the rest
// to a goroutine only when there is a rest.
func (m *Mailbox) giveUpIfDone() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.system.len() > 0 || !m.suspended && (m.user.len() > 0 || m.at < len(m.batch)) {
		return false
	}
	m.running = false
	return true
}

// next returns the next message to process and whether it is a system
// message; nil when there is none, in which case the mailbox is given up in
// the same lock round. Called by the runner only.
func (m *Mailbox) next() (msg any, system bool) {
	if m.at < len(m.batch) && m.nsys.Load() == 0 && !m.suspended {
		return m.fromBatch(), false // taken in an earlier lock round
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for m.system.len() > 0 {
		msg = m.system.pop()
		m.nsys.Add(-1)
		switch msg.(type) {
		case *actor.SuspendMailbox:
			m.suspended = true
		case *actor.ResumeMailbox:
			m.suspended = false
		default:
			return msg, true
		}
	}
	switch {
	case m.suspended:
	case m.at < len(m.batch):
		return m.fromBatch(), false
	case m.user.len() == 1:
		return m.user.pop(), false
	case m.user.len() > 1:
		k := min(m.user.len(), batchMax)
		for i := range k {
			m.batchBuf[i] = m.user.pop()
		}
		m.batch, m.at = m.batchBuf[:k], 0
		m.batched.Store(int32(k))
		return m.fromBatch(), false
	}
	m.running = false
	return nil, false
}

// fromBatch takes the next message of the batch.
func (m *Mailbox) fromBatch() any {
	msg := m.batch[m.at]
	m.batch[m.at] = nil
	if m.at++; m.at == len(m.batch) {
		m.dropBatch()
	} else {
		m.batched.Store(int32(len(m.batch) - m.at))
	}
	return msg
}

func (m *Mailbox) dropBatch() {
	clear(m.batch[m.at:])
	m.batch, m.at = nil, 0
	m.batched.Store(0)
}

// msgRing is a growable FIFO of messages. Its first two places are inline
// (small), so that an actor whose queue stays short (a connection actor's,
// most of the time a route's) allocates nothing for it. A place a message
// left is cleared (pop, and the old places when the ring grows): a message
// kept there would keep what it points to (a request's ticket and whatever
// shares its allocation; a PID, and through its cached process a stopped
// actor) for as long as the mailbox lives.
type msgRing struct {
	buf        []any
	head, size int
	small      [2]any
}

func (r *msgRing) len() int { return r.size }

func (r *msgRing) push(v any) {
	if r.buf == nil {
		r.buf = r.small[:]
	}
	if r.size == len(r.buf) {
		n := 2 * len(r.buf)
		buf := make([]any, n)
		for i := 0; i < r.size; i++ {
			buf[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		// The old places are left behind: small stays in the ring's
		// struct, and would keep the two messages it held until the ring
		// next shrinks back to it, maybe never.
		clear(r.buf)
		r.buf, r.head = buf, 0
	}
	r.buf[(r.head+r.size)%len(r.buf)] = v
	r.size++
}

func (r *msgRing) pop() any {
	if r.size == 0 {
		return nil
	}
	v := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) % len(r.buf)
	r.size--
	if r.size == 0 && len(r.buf) > 1024 {
		r.buf, r.head = nil, 0 // give a burst's memory back
	}
	return v
}
