package client

import (
	"context"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// ProtoactorLogger returns a logger factory for actor.WithLoggerFactory that
// sends protoactor's own logs to l (instead of its colored console logger),
// tagged lib=protoactor. Protoactor's INFO records ("actor system started",
// dead letters) become DEBUG, so that a library stays quiet by default; its
// warnings and errors keep their level. Embedding services that pass
// Config.System should build their system with it.
func ProtoactorLogger(l *slog.Logger) func(*actor.ActorSystem) *slog.Logger {
	quiet := slog.New(infoAsDebug{l.Handler()}).With("lib", "protoactor")
	return func(*actor.ActorSystem) *slog.Logger { return quiet }
}

// infoAsDebug is a slog.Handler that lowers INFO records to DEBUG.
type infoAsDebug struct{ h slog.Handler }

func demote(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (q infoAsDebug) Enabled(ctx context.Context, l slog.Level) bool {
	return q.h.Enabled(ctx, demote(l))
}

func (q infoAsDebug) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return q.h.Handle(ctx, r)
}

func (q infoAsDebug) WithAttrs(as []slog.Attr) slog.Handler { return infoAsDebug{q.h.WithAttrs(as)} }
func (q infoAsDebug) WithGroup(name string) slog.Handler    { return infoAsDebug{q.h.WithGroup(name)} }
