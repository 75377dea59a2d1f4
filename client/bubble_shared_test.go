package client

// A client made outside any testing/synctest bubble and shared by tests that
// run in bubbles, as a suite shares one http.Transport: its callers are
// served inside a bubble, outside, and inside the next one. Mixing a bubble's
// channels, timers or WaitGroup with goroutines outside it is a fatal error
// of the runtime, which ends the whole process: each test runs its scenario
// in a child process (inChild), and fails when the child does not pass.

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// bubbleChildEnv names the test a child process runs (inChild).
const bubbleChildEnv = "CONNACTOR_BUBBLE_CHILD"

// inChild runs f as t's body in a child process: this test binary again,
// with only t's test and bubbleChildEnv set to its name. In the child it runs
// f. In the parent it checks that the child passed: a fatal error of the
// runtime kills the child, whatever the test does.
func inChild(t *testing.T, f func(t *testing.T)) {
	if os.Getenv(bubbleChildEnv) == t.Name() {
		f(t)
		return
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v",
		"-test.timeout=2m")
	cmd.Env = append(os.Environ(), bubbleChildEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name())) || bytes.Contains(out, []byte("fatal error")) {
		t.Fatalf("the child process running %s failed (%v):\n%s", t.Name(), err, lastLines(out, 60))
	}
}

// lastLines is the end of out, for a failure's message.
func lastLines(out []byte, n int) string {
	lines := strings.Split(string(out), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// echoHandler answers "<method> <path> <length of the body read>".
var echoHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	n, _ := io.Copy(io.Discard, r.Body)
	fmt.Fprintf(w, "%s %s %d", r.Method, r.URL.Path, n)
})

// exchange sends one request through rt and checks the echo's answer and,
// when proto is not 0, the response's protocol.
func exchange(t *testing.T, rt http.RoundTripper, method, url string, body io.Reader, proto int) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	n := 0
	if body != nil {
		n = int(req.ContentLength)
		if n <= 0 {
			n = bigBody
		}
	}
	if want := fmt.Sprintf("%s %s %d", method, req.URL.Path, n); string(got) != want {
		t.Fatalf("%s %s: the server answered %q, want %q", method, url, got, want)
	}
	if proto != 0 && resp.ProtoMajor != proto {
		t.Fatalf("%s %s: served over HTTP/%d, want HTTP/%d", method, url, resp.ProtoMajor, proto)
	}
}

// bigBody is the length of the request body that the client writes from a
// goroutine of its own (more than conn's maxInlineBody, of unknown length).
const bigBody = 64 << 10

// someRequests sends a GET, a small POST, and a large POST of unknown length.
func someRequests(t *testing.T, rt http.RoundTripper, url string, proto int) {
	t.Helper()
	exchange(t, rt, http.MethodGet, url+"/get", nil, proto)
	exchange(t, rt, http.MethodPost, url+"/post", strings.NewReader("small body"), proto)
	exchange(t, rt, http.MethodPost, url+"/big", io.LimitReader(zeros{}, bigBody), proto)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// sharedServer starts an HTTP/1.1 server, or an HTTP/2 one over TLS, outside
// any bubble, and a client made outside any bubble that trusts it; both are
// closed when the test ends.
func sharedServer(t *testing.T, h2 bool) (*httptest.Server, *Client) {
	t.Helper()
	srv := httptest.NewUnstartedServer(echoHandler)
	cfg := Config{}
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
		cfg.TLSConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, newClient(t, cfg)
}

func TestClientMadeOutsideServesABubbleThenOutsideThenAnotherBubble(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP1", true: "HTTP2"}[h2], func(t *testing.T) {
			inChild(t, func(t *testing.T) {
				srv, c := sharedServer(t, h2)
				proto := map[bool]int{false: 1, true: 2}[h2]
				synctest.Test(t, func(t *testing.T) { someRequests(t, c, srv.URL, proto) })
				someRequests(t, c, srv.URL, proto) // the connections dialed in the bubble, re-used outside it
				synctest.Test(t, func(t *testing.T) { someRequests(t, c, srv.URL, proto) })
				if st := waitSettled(t, c); st.Open == 0 {
					t.Fatal("no connection left open: nothing was re-used across the bubbles")
				}
			})
		})
	}
}

// gatedServer is a server outside any bubble whose /slow requests wait until
// the test opens the gate; arrived tells of each /slow request's arrival.
func gatedServer(t *testing.T) (srv *httptest.Server, arrived chan struct{}, gate chan struct{}) {
	t.Helper()
	arrived, gate = make(chan struct{}, 8), make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-gate
		}
		echoHandler(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, arrived, gate
}

// waitPending waits until the client has n callers waiting in a route's
// queue. It yields rather than sleeps: in a bubble a sleep's fake clock does
// not move while a caller waits for the client's goroutines.
func waitPending(t *testing.T, c *Client, n int) {
	t.Helper()
	for range 1_000_000 {
		if c.Stats().Pending == n {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("%d callers never waited in the route's queue", n)
}

// A caller in a bubble that waits in the route's queue (MaxConnsPerRoute 1)
// is served when a caller outside the bubble releases the connection, by
// goroutines outside the bubble; another caller there gives up (its context
// is cancelled) while it waits.
func TestClientMadeOutsideServesAndCancelsWaitersInABubble(t *testing.T) {
	inChild(t, func(t *testing.T) {
		srv, arrived, gate := gatedServer(t)
		c := newClient(t, Config{MaxConnsPerRoute: 1})
		slow := make(chan error, 1)
		go func() { slow <- roundTripErr(c, context.Background(), srv.URL+"/slow") }()
		<-arrived // the only connection is leased, outside any bubble
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			gaveUp := make(chan error, 1)
			go func() { gaveUp <- roundTripErr(c, ctx, srv.URL+"/cancelled") }()
			waitPending(t, c, 1)
			cancel()
			if err := <-gaveUp; !errors.Is(err, context.Canceled) {
				t.Fatalf("the cancelled waiter returned %v, want context.Canceled", err)
			}

			served := make(chan error, 1)
			go func() { served <- roundTripErr(c, context.Background(), srv.URL+"/queued") }()
			waitPending(t, c, 1)
			close(gate) // the caller outside gets its answer, and releases the connection to the waiter
			if err := <-served; err != nil {
				t.Fatal(err)
			}
		})
		if err := <-slow; err != nil {
			t.Fatal(err)
		}
		exchange(t, c, http.MethodGet, srv.URL+"/after", nil, 1)
		synctest.Test(t, func(t *testing.T) { exchange(t, c, http.MethodGet, srv.URL+"/again", nil, 1) })
	})
}

// A caller in a bubble never takes an offer from a route's outbox: it
// would judge the offer's due time by the bubble's clock (the year 2000),
// and decline it on its own goroutine. It asks the route, through the
// client's home, as for any other lease; outside the bubble the offers are
// taken as before.
func TestABubbledCallerLeasesByMessageNotFromTheOutbox(t *testing.T) {
	inChild(t, func(t *testing.T) {
		srv, c := sharedServer(t, false)
		exchange(t, c, http.MethodGet, srv.URL+"/dial", nil, 1)
		exchange(t, c, http.MethodGet, srv.URL+"/offered", nil, 1)
		before := routeStats(t, c)
		if before.Offered != 1 {
			t.Fatalf("outside a bubble: %d leases taken from the outbox, want 1", before.Offered)
		}
		synctest.Test(t, func(t *testing.T) { exchange(t, c, http.MethodGet, srv.URL+"/bubbled", nil, 1) })
		// The bubbled caller's release reaches the route through the
		// client's home, after the request returned: a lease taken from
		// the outbox is counted then.
		var after RouteStats
		waitFor(t, "the bubbled request's lease counted", func() bool {
			after = routeStats(t, c)
			return after.Leases > before.Leases
		})
		if after.Offered != before.Offered || after.Leases != before.Leases+1 || after.Reuses != before.Reuses+1 {
			t.Fatalf("the bubbled request: offered %d -> %d, leases %d -> %d, reuses %d -> %d; want the offers unchanged, one more lease, re-using the connection",
				before.Offered, after.Offered, before.Leases, after.Leases, before.Reuses, after.Reuses)
		}
	})
}

// Hedged requests of a bubbled caller, on a client made outside, over
// HTTP/1.1 and HTTP/2: a HEAD over HTTP/2 ends its stream before its head
// is returned, at the client's home, and its attempt's context (made in the
// bubble) was cancelled there, which killed the process.
func TestABubbledCallersHedgedRequestsEndInItsBubble(t *testing.T) {
	inChild(t, func(t *testing.T) {
		for _, h2 := range []bool{false, true} {
			srv, _ := sharedServer(t, h2)
			cfg := Config{Hedge: &HedgePolicy{Delay: time.Hour}} // hedge-eligible: each request races, alone
			if h2 {
				cfg.TLSConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
			}
			c := newClient(t, cfg)
			synctest.Test(t, func(t *testing.T) {
				for _, method := range []string{http.MethodHead, http.MethodGet, http.MethodHead} {
					req, err := http.NewRequest(method, srv.URL+"/h", nil)
					if err != nil {
						t.Fatal(err)
					}
					resp, err := c.RoundTrip(req)
					if err != nil {
						t.Fatalf("%s over HTTP/2 %v: %v", method, h2, err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
	})
}

// roundTripErr sends a GET of url with ctx through c and reads the answer.
func roundTripErr(c *Client, ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// Many tests in a row, each in a bubble of its own with a server of its own
// made there (as a suite's setup makes one per test), share one client made
// outside: HTTP/1.1 and HTTP/2 alternate.
func TestClientMadeOutsideServesManyBubbledTestsInARow(t *testing.T) {
	inChild(t, func(t *testing.T) {
		c := newClient(t, Config{TLSConfig: &tls.Config{InsecureSkipVerify: true}})
		for i := range 60 {
			h2 := i%2 == 1
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					srv := httptest.NewUnstartedServer(echoHandler)
					if h2 {
						srv.EnableHTTP2 = true
						srv.StartTLS()
					} else {
						srv.Start()
					}
					defer srv.Close()
					someRequests(t, c, srv.URL, map[bool]int{false: 1, true: 2}[h2])
				})
			})
		}
	})
}

// A client made and closed inside one bubble, against a real loopback
// server made there too, keeps working: its goroutines are the bubble's.
func TestClientMadeInsideABubbleServesRealLoopbackServers(t *testing.T) {
	inChild(t, func(t *testing.T) {
		for _, h2 := range []bool{false, true} {
			inBubble(t, func(t *testing.T) {
				srv, c := sharedServer(t, h2)
				someRequests(t, c, srv.URL, map[bool]int{false: 1, true: 2}[h2])
				someRequests(t, c, srv.URL, 0)
			})
		}
	})
}
