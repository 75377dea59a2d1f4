package faults_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/connactor/connactor/client"
	fs "github.com/connactor/connactor/internal/testkit/faultserver"
	"github.com/connactor/connactor/internal/testkit/realtest"
	"github.com/connactor/connactor/internal/testkit/toxi"
)

// toxicCase runs requests through a fresh toxiproxy proxy in front of nginx.
type toxicCase struct {
	name string
	opts clientOpts
	// run drives the proxy p (base is its URL) and returns the outcome: a
	// summary and its findings against connactor's expectations (for net/http,
	// findings about behaviour only).
	run func(t *testing.T, p *toxiproxy.Proxy, base string, tg *target) outcome
}

// startToxiproxy starts toxiproxy-server; a missing one skips (loudly) unless
// CI=true, where it fails.
func startToxiproxy(t *testing.T) *toxi.Server {
	t.Helper()
	path, err := toxi.Find()
	if err != nil {
		realtest.Missing(t, "toxiproxy", err.Error())
	}
	s, err := toxi.Start(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runToxicCases starts nginx and toxiproxy, and runs each toxic case against
// both clients, each client through a proxy of its own.
func runToxicCases(t *testing.T) []row {
	upstream := startNginx(t)
	tp := startToxiproxy(t)
	var rows []row
	for _, tc := range toxicCases() {
		r := row{group: "toxiproxy + nginx", name: tc.name, cells: map[string]string{}, passed: true}
		t.Run(tc.name, func(t *testing.T) {
			for _, kind := range kinds {
				t.Run(kind, func(t *testing.T) {
					p, err := tp.Proxy("nginx", upstream)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { p.Delete() })
					tg := newTarget(t, kind, tc.opts)
					o := tc.run(t, p, "http://"+p.Listen, tg)
					r.cells[kind] = o.cell()
					finish(t, tg, o.problems, &r)
				})
			}
		})
		rows = append(rows, r)
	}
	return rows
}

// nginxBody checks that r is a 200 whose body names r's request, and returns
// nginx's connection number from it.
func nginxBody(r result) (conn string, ok bool) {
	if r.err != nil || r.bodyErr != nil || r.status != 200 {
		return "", false
	}
	rest, found := strings.CutPrefix(r.body, "req="+r.id+" conn=")
	if !found {
		return "", false
	}
	conn, _, found = strings.Cut(rest, "\n")
	return conn, found
}

func isNginxOK(r result) bool {
	_, ok := nginxBody(r)
	return ok
}

// asScripted rewrites a correct nginx body as the scripted servers' (the
// request's name alone), so expect.check can judge it; a wrong one stays.
func asScripted(r result) result {
	if _, ok := nginxBody(r); ok {
		r.body = fs.Body(r.id)
	}
	return r
}

// many sends n requests for path, callers at a time, and reports failures and
// desyncs (a body naming another request).
func many(tg *target, base, path, prefix string, n, callers int) outcome {
	var mu sync.Mutex
	failed, wrong := 0, 0
	var first string
	var untyped error
	conns := map[string]bool{}
	var wg sync.WaitGroup
	work := make(chan int)
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() { // owned by wg
			defer wg.Done()
			for i := range work {
				r := tg.get(base, path, fmt.Sprint(prefix, i))
				conn, ok := nginxBody(r)
				mu.Lock()
				switch {
				case r.err != nil || r.bodyErr != nil:
					failed++
					if first == "" {
						first = describe(r)
					}
					if r.err != nil && !typed(r.err) {
						untyped = r.err
					}
				case !ok:
					wrong++
				default:
					conns[conn] = true
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	o := outcome{summary: fmt.Sprintf("%d/%d ok on %d conns", n-failed-wrong, n, len(conns))}
	if failed > 0 {
		o.summary += fmt.Sprintf(", %d failed (first: %s)", failed, first)
		o.problems = append(o.problems, fmt.Sprintf("%d of %d requests failed; first: %s", failed, n, first))
	}
	if wrong > 0 {
		o.summary += fmt.Sprintf(", %d WRONG", wrong)
		o.problems = append(o.problems, fmt.Sprintf("%d of %d responses named another request", wrong, n))
	}
	if untyped != nil && tg.kind == kindConnactor {
		o.problems = append(o.problems, "untyped error: "+untyped.Error())
	}
	return o
}

func addToxic(t *testing.T, p *toxiproxy.Proxy, typ, stream string, attrs toxiproxy.Attributes) string {
	t.Helper()
	name := typ + "_" + stream
	if _, err := p.AddToxic(name, typ, stream, 1, attrs); err != nil {
		t.Fatal(err)
	}
	return name
}

func removeToxic(t *testing.T, p *toxiproxy.Proxy, name string) {
	t.Helper()
	if err := p.RemoveToxic(name); err != nil {
		t.Fatal(err)
	}
}

// failThenRecover sends one GET while the toxic is on, removes it and sends
// another: the first must fail with a typed error (or, where allowed, succeed),
// the second must succeed on a new connection.
func failThenRecover(t *testing.T, p *toxiproxy.Proxy, base string, tg *target, toxic string, want expect) outcome {
	bad := tg.get(base, "/", "b1")
	removeToxic(t, p, toxic)
	dialed := tg.dialer.Counts().Dialed
	good := tg.get(base, "/", "g1")
	o := outcome{bad: asScripted(bad), good: asScripted(good), hasGood: true,
		reused: tg.dialer.Counts().Dialed == dialed} // the bad socket was the only one
	o.problems = want.check(o, tg.kind == kindConnactor)
	o.summary = o.cell()
	return o
}

func toxicCases() []toxicCase {
	return []toxicCase{
		{name: "latency 50ms ± 20ms both ways, 40 GETs by 4 callers",
			run: func(t *testing.T, p *toxiproxy.Proxy, base string, tg *target) outcome {
				addToxic(t, p, "latency", "downstream", toxiproxy.Attributes{"latency": 50, "jitter": 20})
				addToxic(t, p, "latency", "upstream", toxiproxy.Attributes{"latency": 50, "jitter": 20})
				return many(tg, base, "/", "l", 40, 4)
			}},
		{name: "bandwidth 1 MB/s, 6 x 128 KiB by 2 callers",
			run: func(t *testing.T, p *toxiproxy.Proxy, base string, tg *target) outcome {
				addToxic(t, p, "bandwidth", "downstream", toxiproxy.Attributes{"rate": 1024})
				return many(tg, base, "/big", "w", 6, 2)
			}},
		{name: "slicer (4 ± 3 byte slices, 200µs apart) both ways, 40 GETs by 4 callers",
			run: func(t *testing.T, p *toxiproxy.Proxy, base string, tg *target) outcome {
				attrs := toxiproxy.Attributes{"average_size": 4, "size_variation": 3, "delay": 200}
				addToxic(t, p, "slicer", "downstream", attrs)
				addToxic(t, p, "slicer", "upstream", attrs)
				return many(tg, base, "/", "s", 40, 4)
			}},
		{name: "reset_peer on new connections, then removed",
			run: func(t *testing.T, p *toxiproxy.Proxy, base string, tg *target) outcome {
				name := addToxic(t, p, "reset_peer", "downstream", toxiproxy.Attributes{"timeout": 0})
				return failThenRecover(t, p, base, tg, name, expect{errIs: []error{client.ErrOutcomeUnknown}})
			}},
		{name: "reset_peer on a re-used connection (and its retry), then removed",
			run: func(t *testing.T, p *toxiproxy.Proxy, base string, tg *target) outcome {
				if warm := tg.get(base, "/", "w1"); !isNginxOK(warm) {
					return outcome{summary: "warm-up failed: " + describe(warm), problems: []string{"warm-up failed: " + describe(warm)}}
				}
				// The answer's first byte triggers the reset, on the pooled
				// connection and on any new one.
				name := addToxic(t, p, "reset_peer", "downstream", toxiproxy.Attributes{"timeout": 0})
				return failThenRecover(t, p, base, tg, name, expect{errIs: []error{client.ErrOutcomeUnknown}})
			}},
		{name: "timeout 100ms closes an idle pooled connection, then removed",
			run: func(t *testing.T, p *toxiproxy.Proxy, base string, tg *target) outcome {
				if warm := tg.get(base, "/", "w1"); !isNginxOK(warm) {
					return outcome{summary: "warm-up failed: " + describe(warm), problems: []string{"warm-up failed: " + describe(warm)}}
				}
				// toxiproxy closes the idle connection 100ms after the toxic
				// arrives; the client must notice by itself.
				name := addToxic(t, p, "timeout", "downstream", toxiproxy.Attributes{"timeout": 100})
				noticed := waitSockets(tg, 0)
				removeToxic(t, p, name)
				o := many(tg, base, "/", "g", 1, 1)
				if !noticed {
					o.problems = append(o.problems, "the closed idle connection stayed open")
					o.summary += "; closed idle conn NOT noticed"
				} else {
					o.summary += "; closed idle conn noticed"
				}
				return o
			}},
		{name: "timeout (responses stall), ResponseHeaderTimeout 1s, then removed",
			opts: clientOpts{responseHeaderTimeout: time.Second},
			run: func(t *testing.T, p *toxiproxy.Proxy, base string, tg *target) outcome {
				name := addToxic(t, p, "timeout", "downstream", toxiproxy.Attributes{"timeout": 0})
				return failThenRecover(t, p, base, tg, name,
					expect{errIs: []error{client.ErrOutcomeUnknown, client.ErrResponseHeaderTimeout}})
			}},
		{name: "timeout 300ms (requests dropped, then closed), then removed",
			run: func(t *testing.T, p *toxiproxy.Proxy, base string, tg *target) outcome {
				name := addToxic(t, p, "timeout", "upstream", toxiproxy.Attributes{"timeout": 300})
				return failThenRecover(t, p, base, tg, name, expect{errIs: []error{client.ErrOutcomeUnknown}})
			}},
	}
}

// waitSockets waits (settleWait at most) until the client has n sockets open.
func waitSockets(tg *target, n int) bool {
	deadline := time.Now().Add(settleWait)
	for tg.dialer.Counts().Open != n {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond) // socket closes have no event to wait on
	}
	return true
}
