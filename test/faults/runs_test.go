package faults_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// badThenGood is the default run: GET /bad, then GET /good at once (within
// the idle watch delay), and where each arrived on the server.
func badThenGood(t *testing.T, f *fixture, tg *target, w expect) outcome {
	o := outcome{bad: tg.get(f.base, "/bad", "b1")}
	if w.noGood {
		return o
	}
	if f.between != nil {
		f.between(t)
	}
	o.good, o.hasGood = tg.get(f.base, "/good", "g1"), true
	o.reused = f.sameConn("b1", "g1")
	return o
}

// sameConn reports whether the requests named a and b first arrived on the
// same connection.
func (f *fixture) sameConn(a, b string) bool {
	connOf := f.connOf
	if connOf == nil {
		if f.srv == nil {
			return false
		}
		connOf = f.srv.ConnOf
	}
	ca, okA := connOf(a)
	cb, okB := connOf(b)
	return okA && okB && ca == cb
}

// deadlineThenGood sends /bad with a 1 s deadline, then /good.
func deadlineThenGood(t *testing.T, f *fixture, tg *target) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	o := outcome{bad: tg.do(ctx, http.MethodGet, f.base+"/bad?id=b1", "b1", "", true)}
	cancel()
	o.good, o.hasGood = tg.get(f.base, "/good", "g1"), true
	o.reused = f.sameConn("b1", "g1")
	return o
}

// bigPostThenGood POSTs 16 MiB (more than loopback socket buffers hold) to /bad
// with a 1 s deadline, then GETs /good.
func bigPostThenGood(t *testing.T, f *fixture, tg *target) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	o := outcome{bad: tg.do(ctx, http.MethodPost, f.base+"/bad?id=b1", "b1", strings.Repeat("x", 16<<20), true)}
	cancel()
	o.good, o.hasGood = tg.get(f.base, "/good", "g1"), true
	o.reused = f.sameConn("b1", "g1")
	return o
}

// closingServerPOSTs sends 50 POSTs whose bodies cannot be replayed, one after
// the other, to a server that closes after each response without saying so.
// Each must succeed, each must reach the server exactly once.
func closingServerPOSTs(t *testing.T, f *fixture, tg *target) outcome {
	const n = 50
	var o outcome
	failed, wrong := 0, 0
	var first error
	for i := 0; i < n; i++ {
		id := fmt.Sprint("p", i)
		ctx, cancel := context.WithTimeout(context.Background(), requestWait)
		r := tg.do(ctx, http.MethodPost, f.base+"/post?id="+id, id, "payload "+id, false)
		cancel()
		switch {
		case r.err != nil || r.bodyErr != nil:
			failed++
			if first == nil {
				first = r.err
				if first == nil {
					first = r.bodyErr
				}
			}
		case !r.correct(200):
			wrong++
		}
	}
	counts := f.srv.Counts()
	o.summary = fmt.Sprintf("%d/%d failed, %d wrong, %d POSTs reached the server on %d connections", failed, n, wrong, counts.Requests, counts.Accepted)
	if first != nil {
		o.summary += "; first: " + describeErr(first)
	}
	if failed > 0 || wrong > 0 {
		o.problems = append(o.problems, fmt.Sprintf("%d of %d POSTs failed, %d got a wrong response", failed, n, wrong))
	}
	if counts.Requests > n {
		o.problems = append(o.problems, fmt.Sprintf("%d POSTs reached the server for %d sent: some twice", counts.Requests, n))
	}
	if first != nil && tg.kind == kindConnactor && !typed(first) {
		o.problems = append(o.problems, "untyped error: "+first.Error())
	}
	return o
}

// check returns what is wrong with o against w. With strict (connactor) errors
// must also be typed and carry the expected sentinels and causes; without
// (net/http, which has no such sentinels) only behaviour counts: a response
// where an error was due or the reverse, a wrong response, a re-used bad
// connection.
func (w expect) check(o outcome, strict bool) []string {
	var p []string
	b := o.bad
	badOK := false
	switch {
	case b.err != nil:
		if strict && !typed(b.err) {
			p = append(p, "untyped error: "+b.err.Error())
		}
		if w.errIs == nil && w.errAs == nil {
			p = append(p, "an error where a response was due: "+b.err.Error())
			break
		}
		if !strict {
			break
		}
		for _, e := range w.errIs {
			if !errors.Is(b.err, e) {
				p = append(p, fmt.Sprintf("error is not %v: %v", e, b.err))
			}
		}
		if w.errAs != nil && !w.errAs(b.err) {
			p = append(p, "error lacks its cause: "+b.err.Error())
		}
	case b.bodyErr != nil:
		if !w.bodyErr {
			p = append(p, "body error: "+b.bodyErr.Error())
		}
	default:
		if w.status == 0 {
			p = append(p, fmt.Sprintf("a response where an error was due: %d %q", b.status, b.body))
		} else if !b.correct(w.status) {
			p = append(p, fmt.Sprintf("wrong response: %d %q to request %s", b.status, b.body, b.id))
		} else {
			badOK = true
		}
	}
	if o.hasGood {
		if !o.good.correct(200) {
			p = append(p, "the next request got "+describe(o.good))
		}
		if o.reused && !w.reuseOK && (!badOK || !w.keepConn) {
			p = append(p, "the next request re-used the bad connection")
		}
	}
	return p
}

// cell describes an outcome in the table.
func (o outcome) cell() string {
	if o.summary != "" {
		return o.summary
	}
	s := describe(o.bad)
	if !o.hasGood {
		return s
	}
	switch {
	case !o.good.correct(200):
		s += "; next: " + describe(o.good)
	case o.reused:
		s += "; next: re-used conn"
	default:
		s += "; next: new conn"
	}
	return s
}
