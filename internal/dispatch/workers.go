package dispatch

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/sourcegraph/conc/panics"
)

// workers is the bounded pool that runs Send's notification handlers: at most
// max goroutines, started on demand with Config.Go (whose owner waits for them
// after Close), fed from an unbounded FIFO.
//
// Why not conc's pool.Pool: its Go blocks while every worker is busy, and a
// blocked submitter can watch neither Abort nor Close. Here submit never
// blocks, so the goroutines that submit (a request's dispatch goroutine, or a
// handler that calls Send, Abort or AbortAll) can never deadlock on handlers.
// Each task is run under conc's panics.Catcher: a panicking handler costs its
// Handle, never a worker.
type workers struct {
	max   int
	spawn func(func()) // starts a goroutine its owner waits for (Config.Go)
	log   *slog.Logger

	mu      sync.Mutex
	cond    sync.Cond
	queue   []func()
	head    int // queue[head:] is pending
	idle    int // workers waiting in cond.Wait
	running int
	closed  bool
}

func (w *workers) init(max int, spawn func(func()), log *slog.Logger) {
	w.max, w.spawn, w.log = max, spawn, log
	w.cond.L = &w.mu
}

// submit queues f for a worker and reports false (f dropped) once the pool is
// closed. It never blocks on workers. It must be called from a goroutine owned
// by Config.Go's owner (so that starting a worker cannot race with its Wait).
func (w *workers) submit(f func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.queue = append(w.queue, f)
	if len(w.queue)-w.head > w.idle && w.running < w.max {
		w.running++
		w.spawn(w.work) // owned by spawn's owner (Config.Go); ends when the pool is closed and drained
	}
	w.cond.Signal()
	return true
}

func (w *workers) work() {
	w.mu.Lock()
	for {
		for w.head == len(w.queue) && !w.closed {
			w.idle++
			w.cond.Wait()
			w.idle--
		}
		if w.head == len(w.queue) {
			w.running--
			w.mu.Unlock()
			return
		}
		f := w.queue[w.head]
		w.queue[w.head] = nil
		w.head++
		if w.head == len(w.queue) {
			w.queue, w.head = w.queue[:0], 0
		} else if w.head > 1024 && w.head > len(w.queue)/2 {
			w.queue = append(w.queue[:0], w.queue[w.head:]...)
			w.head = 0
		}
		w.mu.Unlock()
		f()
		w.mu.Lock()
	}
}

// close stops taking tasks; the workers run what is queued, then exit.
func (w *workers) close() {
	w.mu.Lock()
	w.closed = true
	w.cond.Broadcast()
	w.mu.Unlock()
}

// try runs a handler callback, containing a panic: the panic is logged with its
// stack and returned as an error wrapping ErrHandlerPanicked (and the panic
// value, when it is an error).
func (w *workers) try(h *Handle, what string, f func()) error {
	var pc panics.Catcher
	pc.Try(f)
	r := pc.Recovered()
	if r == nil {
		return nil
	}
	w.log.Error("connactor: notification handler panicked", "notification", what,
		"url", h.urlString(), "panic", fmt.Sprint(r.Value), "stack", string(r.Stack))
	if err, ok := r.Value.(error); ok {
		return fmt.Errorf("%w in %s: %w", ErrHandlerPanicked, what, err)
	}
	return fmt.Errorf("%w in %s: %v", ErrHandlerPanicked, what, r.Value)
}
