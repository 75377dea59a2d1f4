// Package mailbox holds the inline-first mailbox of connactor's actors: the
// route actors (actors/) and the connection actors (conn/) use it instead of
// protoactor's default mailbox, which starts a goroutine per wake-up and
// allocates per message.
package mailbox

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Inline returns a mailbox producer whose mailbox processes a message sent to
// an idle actor at once on the sender's goroutine, up to budget messages;
// whatever is left is handed to a new goroutine, as protoactor's default
// mailbox does for every message. It allocates nothing per message (the queue
// is a ring that grows in bursts only).
//
// The point is the request path: a caller that leases from an idle route, or
// sends its exchange to an idle connection, has its answer when Send returns,
// with no goroutine started or switched to (protoactor's default mailbox starts
// one per wake-up, ~2 us, measured with protoactor-go's pinned version). protoactor's synchronized
// dispatcher would do the same but drains the mailbox to empty on the sender's
// goroutine, so under load one caller could be kept serving everybody else's
// messages indefinitely, and its default mailbox costs two allocations per
// message (the queue node and the scheduled method value); the budget bounds
// the work done for others to a few messages.
//
// An actor whose Receive blocks (a connection actor doing its exchange's I/O)
// blocks only the sender whose message it processes, and, while it does,
// messages sent to it queue and are processed after it, on that goroutine,
// up to budget: a sender also waits for the others' messages that queued
// behind its own, which a budget of 1 rules out (the connection actors').
//
// Order is that of the default mailbox: system messages first, user messages
// in arrival order, one at a time. Safe for concurrent use.
func Inline(budget int) actor.MailboxProducer {
	if budget < 1 {
		budget = 1
	}
	return func() actor.Mailbox { return &inlineMailbox{budget: budget} }
}

const (
	mailboxIdle int32 = iota
	mailboxRunning
)

type inlineMailbox struct {
	mu        sync.Mutex // guards the two queues only
	user      msgRing
	system    msgRing
	status    atomic.Int32
	suspended atomic.Bool
	invoker   actor.MessageInvoker
	budget    int
}

func (m *inlineMailbox) PostUserMessage(msg any) {
	m.mu.Lock()
	m.user.push(msg)
	m.mu.Unlock()
	m.schedule()
}

func (m *inlineMailbox) PostSystemMessage(msg any) {
	m.mu.Lock()
	m.system.push(msg)
	m.mu.Unlock()
	m.schedule()
}

func (m *inlineMailbox) RegisterHandlers(invoker actor.MessageInvoker, _ actor.Dispatcher) {
	m.invoker = invoker
}

func (m *inlineMailbox) Start() {}

func (m *inlineMailbox) UserMessageCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.user.len()
}

// schedule runs the mailbox on this goroutine if it is idle, within the budget,
// and hands the rest to a goroutine of its own.
func (m *inlineMailbox) schedule() {
	if !m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		return // running elsewhere: that goroutine will see the message
	}
	if !m.run(m.budget) {
		go m.drain() // owned by the mailbox: ends when the queue is empty
		return
	}
	m.status.Store(mailboxIdle)
	if m.pending() && m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
		go m.drain() // a message arrived as we finished
	}
}

// drain processes messages until the queues are empty, as the default mailbox does.
func (m *inlineMailbox) drain() {
	for {
		m.run(-1)
		m.status.Store(mailboxIdle)
		if !m.pending() || !m.status.CompareAndSwap(mailboxIdle, mailboxRunning) {
			return
		}
	}
}

// pending reports whether there is work: system messages, or user messages
// while not suspended.
func (m *inlineMailbox) pending() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.system.len() > 0 || (!m.suspended.Load() && m.user.len() > 0)
}

func (m *inlineMailbox) pop(q *msgRing) any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return q.pop()
}

// run processes up to limit messages (limit < 0: until empty). It reports
// whether it stopped because there was nothing (more) to do. A panic in the
// actor is escalated to its supervisor, as in the default mailbox.
func (m *inlineMailbox) run(limit int) (done bool) {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
			done = true
		}
	}()
	for n := 0; limit < 0 || n < limit; n++ {
		if limit < 0 && n > 0 && n%300 == 0 {
			runtime.Gosched()
		}
		if msg = m.pop(&m.system); msg != nil {
			switch msg.(type) {
			case *actor.SuspendMailbox:
				m.suspended.Store(true)
			case *actor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		if m.suspended.Load() {
			return true
		}
		if msg = m.pop(&m.user); msg == nil {
			return true
		}
		m.invoker.InvokeUserMessage(msg)
	}
	return !m.pending()
}

// msgRing is a growable FIFO of messages. Its first two places are inline
// (small), so that an actor whose queue stays short (a connection actor's,
// most of the time a route's) allocates nothing for it.
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
