package faults_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/testkit/h2server"
)

// h2fixture is what an HTTP/2 case runs against: a scripted server over TLS
// with ALPN h2, fresh per client.
type h2fixture struct {
	fixture                  // base, opts, between; connOf reads h2's requests
	h2      *h2server.Server // the server (fixture.srv stays nil)
	proceed func()           // lets the server's script go on, where it waits for the test

	mu  sync.Mutex
	bad []string // what the server saw the client do against the protocol
}

// violation records something the client did that the protocol forbids, as
// the server saw it (a stream above the announced limit): a problem of the
// case, for either client.
func (f *h2fixture) violation(format string, args ...any) {
	f.mu.Lock()
	f.bad = append(f.bad, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *h2fixture) violations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.bad)
}

// h2serve starts a scripted HTTP/2 server whose index-th connection follows
// script(f, index); cleanup closes it.
func h2serve(t *testing.T, script func(f *h2fixture, index int) h2server.Script) *h2fixture {
	t.Helper()
	f := &h2fixture{}
	s, err := h2server.Start(h2server.Config{Conn: func(i int) h2server.Script { return script(f, i) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f.h2, f.base = s, s.URL()
	f.connOf = func(id string) (int, bool) {
		conns := s.ConnsOf(id)
		if len(conns) == 0 {
			return 0, false
		}
		return conns[0], true
	}
	return f
}

// firstConn is a script whose first connection misbehaves as bad says, and
// whose later connections serve every request well.
func firstConn(bad func(f *h2fixture) h2server.Script) func(f *h2fixture, index int) h2server.Script {
	return func(f *h2fixture, i int) h2server.Script {
		if i == 0 {
			return bad(f)
		}
		return h2server.Script{}
	}
}

// everyConn is a script that serves /good well on every connection and hands
// every other request to bad (which must not block: a request it leaves
// unanswered stays open).
func everyConn(bad func(f *h2fixture, c *h2server.Conn, r *h2server.Request)) func(f *h2fixture, index int) h2server.Script {
	return func(f *h2fixture, _ int) h2server.Script {
		return h2server.Script{Run: func(c *h2server.Conn) {
			h2server.Serve(c, func(c *h2server.Conn, r *h2server.Request) {
				if strings.HasPrefix(r.Path, "/good") {
					c.OK(r)
					return
				}
				bad(f, c, r)
			})
		}}
	}
}

// awaiting is a between that waits for the server's script to close ch.
func awaiting(ch <-chan struct{}, never string) func(t *testing.T) {
	return func(t *testing.T) {
		select {
		case <-ch:
		case <-time.After(settleWait):
			t.Error(never)
		}
	}
}

// take reads n requests; false when the connection ended first.
func take(c *h2server.Conn, n int) ([]*h2server.Request, bool) {
	var rs []*h2server.Request
	for len(rs) < n {
		r, ok := c.Next()
		if !ok {
			return rs, false
		}
		rs = append(rs, r)
	}
	return rs, true
}

// refuseAll is the rest of a connection that takes no new stream (its limit
// is 0, or it sent GOAWAY): every request that still comes is a violation,
// refused with REFUSED_STREAM so that the client may replay it elsewhere.
func refuseAll(f *h2fixture, c *h2server.Conn, why string) {
	h2server.Serve(c, func(c *h2server.Conn, r *h2server.Request) {
		f.violation("request %s opened stream %d on connection %d after %s", r.ID, r.Stream, c.Index, why)
		c.ResetStream(r.Stream, 7) // REFUSED_STREAM
	})
}

// onFirstConnOf reports whether the request named id arrived on the
// connection the request named of first arrived on.
func onFirstConnOf(f *h2fixture, id, of string) bool {
	first := f.h2.ConnsOf(of)
	return len(first) > 0 && slices.Contains(f.h2.ConnsOf(id), first[0])
}

// inFlight sends a GET /bad for each id, each once the server has read the
// one before (so that they share a connection), and returns the results once
// every one is over.
func inFlight(t *testing.T, f *h2fixture, tg *target, ids ...string) map[string]result {
	return sendInFlight(t, f, tg, ids...).wait()
}

// running is requests sent and not yet over.
type running struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	res map[string]result
}

// sendInFlight sends a GET /bad for each id, each once the server has read
// the one before, and returns without waiting for the answers.
func sendInFlight(t *testing.T, f *h2fixture, tg *target, ids ...string) *running {
	r := &running{res: make(map[string]result, len(ids))}
	for _, id := range ids {
		r.wg.Add(1)
		go func() { // owned by r.wg: wait waits
			defer r.wg.Done()
			res := tg.get(f.base, "/bad", id)
			r.mu.Lock()
			r.res[id] = res
			r.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), requestWait)
		err := f.h2.WaitSeen(ctx, id)
		cancel()
		if err != nil {
			t.Logf("request %s never reached the server", id)
		}
	}
	return r
}

// wait returns the results once every request is over.
func (r *running) wait() map[string]result {
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.res
}

// judge collects the findings of a custom run, in its summary and problems.
// strict is connactor's: its errors must be typed and carry what is due.
type judge struct {
	f      *h2fixture
	strict bool
	parts  []string
	o      outcome
}

func newJudge(f *h2fixture, tg *target) *judge {
	return &judge{f: f, strict: tg.kind == kindConnactor}
}

func (j *judge) problem(format string, args ...any) {
	j.o.problems = append(j.o.problems, fmt.Sprintf(format, args...))
}

// landed names the connections the request named id arrived on: "conn 0",
// or "conns 0, 1" when it was sent again.
func (j *judge) landed(id string) string {
	conns := j.f.h2.ConnsOf(id)
	switch len(conns) {
	case 0:
		return "never sent"
	case 1:
		return fmt.Sprint("conn ", conns[0])
	}
	s := make([]string, len(conns))
	for i, c := range conns {
		s[i] = fmt.Sprint(c)
	}
	return "conns " + strings.Join(s, ", ")
}

// ok requires r to be a correct 200.
func (j *judge) ok(r result) {
	j.parts = append(j.parts, fmt.Sprintf("%s: %s on %s", r.id, describe(r), j.landed(r.id)))
	if !r.correct(200) {
		j.problem("%s: want 200 %q, got %s", r.id, "req="+r.id, describe(r))
	}
}

// failed requires r to be an error: for connactor, typed and carrying errs.
func (j *judge) failed(r result, errs ...error) {
	j.parts = append(j.parts, fmt.Sprintf("%s: %s", r.id, describe(r)))
	if r.err == nil {
		j.problem("%s: want an error, got %s", r.id, describe(r))
		return
	}
	if !j.strict {
		return
	}
	if !typed(r.err) {
		j.problem("%s: untyped error: %v", r.id, r.err)
	}
	for _, e := range errs {
		if !errors.Is(r.err, e) {
			j.problem("%s: error is not %v: %v", r.id, e, r.err)
		}
	}
}

// replayed requires the request named id to have reached the server on
// connection from, and then, sent again, on another.
func (j *judge) replayed(id string, from int) {
	conns := j.f.h2.ConnsOf(id)
	if len(conns) < 2 || conns[0] != from || conns[len(conns)-1] == from {
		j.problem("%s: want it sent on conn %d, then again on another; got %s", id, from, j.landed(id))
	}
}

// stayed requires the request named id to have reached the server once, on
// connection conn.
func (j *judge) stayed(id string, conn int) {
	if conns := j.f.h2.ConnsOf(id); !slices.Equal(conns, []int{conn}) {
		j.problem("%s: want it sent once, on conn %d; got %s", id, conn, j.landed(id))
	}
}

// good sends GET /good named g1 and requires its own response, on a
// connection other than bad.
func (j *judge) good(tg *target, bad int) {
	g := tg.get(j.f.base, "/good", "g1")
	conns := j.f.h2.ConnsOf("g1")
	switch {
	case !g.correct(200):
		j.parts = append(j.parts, "next: "+describe(g))
		j.problem("the next request got %s", describe(g))
	case slices.Contains(conns, bad):
		j.parts = append(j.parts, "next: re-used conn")
		j.problem("the next request went on the bad connection (conn %d)", bad)
	default:
		j.parts = append(j.parts, "next: new conn")
	}
}

// outcome ends the run.
func (j *judge) outcome() outcome {
	j.o.summary = strings.Join(j.parts, "; ")
	return j.o
}
