package client

import (
	"context"
	"log/slog"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// SharedSystem returns an actor system for clients to share
// (Config.System), made on the first call and kept for the process's life.
//
// A client made with System nil makes an actor system of its own, and
// protoactor makes every system's process registry at once: 32,768 Go maps
// (1,024 concurrent maps of 32 shards), about 2.9 MB and 67,000
// allocations, which is nearly all of what New costs (about 8 ms on a warm
// 2-core machine, 25-50 ms in a process that has just started; net/http's
// Transport costs nothing to make). A process that makes many clients, one
// per test or one per library instance that is never closed, pays that
// each time. Clients made on SharedSystem pay it once: each still has its
// own supervisor, routes, connections, limits and goroutines, and Close
// stops them all, leaving the system to the others. What they share is the
// registry of actor names, and protoactor's own records (dead letters, at
// DEBUG; an actor's panic, which the client's supervision also logs to its
// Logger), which go to slog.Default() as it is when each is written,
// tagged lib=protoactor.
//
// Not for a client made inside a testing/synctest bubble: such a client's
// actors belong in its bubble, as its own system does.
func SharedSystem() *actor.ActorSystem {
	sharedOnce.Do(func() {
		shared = actor.NewActorSystem(actor.WithLoggerFactory(ProtoactorLogger(slog.New(defaultHandler{}))))
	})
	return shared
}

var (
	sharedOnce sync.Once
	shared     *actor.ActorSystem
)

// defaultHandler is slog.Default()'s handler as it is at each record: a
// process may set its default logger after its first client.
type defaultHandler struct{ attrs []slog.Attr }

func (d defaultHandler) handler() slog.Handler {
	h := slog.Default().Handler()
	if len(d.attrs) > 0 {
		h = h.WithAttrs(d.attrs)
	}
	return h
}

func (d defaultHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return d.handler().Enabled(ctx, l)
}

func (d defaultHandler) Handle(ctx context.Context, r slog.Record) error {
	return d.handler().Handle(ctx, r)
}

func (d defaultHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return defaultHandler{attrs: append(d.attrs[:len(d.attrs):len(d.attrs)], as...)}
}

// WithGroup is not used by protoactor's loggers; a group is kept by
// resolving the handler once.
func (d defaultHandler) WithGroup(name string) slog.Handler { return d.handler().WithGroup(name) }
