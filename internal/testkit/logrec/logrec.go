// Package logrec is a slog handler that records what is logged, for the
// tests of what the library's actors log (a warning once per episode, a
// restart with its reason).
package logrec

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
)

// Recorder is a slog.Handler that keeps every record, at every level, with
// its attributes as text. Safe for concurrent use; the zero Recorder is ready.
// Loggers derived with With or WithGroup record into the same Recorder (their
// attributes and groups are not kept: the tests read the record's own).
type Recorder struct {
	mu      sync.Mutex
	records []Record
}

// Record is one record: its level, message and attributes (each value as
// slog.Value.String gives it).
type Record struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// Logger returns a logger that records into r.
func (r *Recorder) Logger() *slog.Logger { return slog.New(r) }

func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *Recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *Recorder) WithGroup(string) slog.Handler            { return r }

func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	out := Record{Level: rec.Level, Msg: rec.Message, Attrs: map[string]string{}}
	rec.Attrs(func(a slog.Attr) bool {
		out.Attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	r.records = append(r.records, out)
	r.mu.Unlock()
	return nil
}

// Find returns the records of level whose message is msg.
func (r *Recorder) Find(level slog.Level, msg string) []Record {
	return r.filter(func(rec Record) bool { return rec.Level == level && rec.Msg == msg })
}

// Count returns how many records of level have msg as their message.
func (r *Recorder) Count(level slog.Level, msg string) int { return len(r.Find(level, msg)) }

// Containing returns the records whose message contains part, at any level.
func (r *Recorder) Containing(part string) []Record {
	return r.filter(func(rec Record) bool { return strings.Contains(rec.Msg, part) })
}

// Having returns the records whose attribute key reads value.
func (r *Recorder) Having(key, value string) []Record {
	return r.filter(func(rec Record) bool { v, ok := rec.Attrs[key]; return ok && v == value })
}

// All returns every record so far, for failure reports.
func (r *Recorder) All() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.records)
}

func (r *Recorder) filter(keep func(Record) bool) []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Record
	for _, rec := range r.records {
		if keep(rec) {
			out = append(out, rec)
		}
	}
	return out
}
