package actors

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Tests of the pool's waits, run in a bubble of testing/synctest: its clock
// moves only when every goroutine of the test waits, so "answered within
// 100 ms" is an exact statement about the bubble's time, which no load on
// the machine can stretch. The pool's connections are net.Pipe ends whose far
// ends a goroutine of the bubble serves (pipeServer).

// pipeServer answers every request head on its connections with a 200 and a
// two-byte body, on keep-alive connections.
type pipeServer struct {
	wg sync.WaitGroup
	mu sync.Mutex
	cs []net.Conn
}

func (s *pipeServer) dial(context.Context, string, string) (net.Conn, error) {
	c, peer := net.Pipe()
	s.mu.Lock()
	s.cs = append(s.cs, peer)
	s.mu.Unlock()
	s.wg.Go(func() { serveCanned(peer, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }) // owned by s.wg, waited for by close
	return c, nil
}

// serveCanned answers every request head (no body) on c with resp, until c
// fails or closes.
func serveCanned(c net.Conn, resp string) {
	br := bufio.NewReader(c)
	for skipHead(br) == nil {
		if _, err := io.WriteString(c, resp); err != nil {
			return
		}
	}
}

// skipHead reads one request head, to its blank line.
func skipHead(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			return nil
		}
	}
}

func (s *pipeServer) close() {
	s.mu.Lock()
	for _, c := range s.cs {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// newPipePool starts a pool on a pipeServer, inside the test's bubble, and
// closes both at the test's end.
func newPipePool(t *testing.T, cfg PoolConfig) *Pool {
	t.Helper()
	srv := &pipeServer{}
	cfg.DialContext = srv.dial
	cfg.DialTimeout = 10 * time.Second
	cfg.MaxIdleTime = time.Minute
	cfg.ExpiryInterval = time.Second
	cfg.MaxResponseHeaderBytes = 1 << 20
	cfg.Logger, cfg.LoggerFactory = quiet, quietFactory
	cfg.MaxConnsTotal = max(cfg.MaxConnsTotal, 64)
	cfg.MaxConcurrentRequests = max(cfg.MaxConcurrentRequests, 1)
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close(context.Background())
		srv.close()
		// protoactor's dead-letter throttle waits for one tick of a second:
		// it ends inside the bubble, whose clock makes this sleep instant.
		time.Sleep(2 * time.Second)
	})
	return p
}

// outcome is how a caller's request ended, and when (the bubble's time since
// the test's start).
type outcome struct {
	err error
	at  time.Duration
}

// callers starts n requests to url at once (a response's body is closed at
// once), and returns their outcomes.
func callers(t *testing.T, p *Pool, url string, n int, start time.Time) chan outcome {
	t.Helper()
	out := make(chan outcome, n)
	for range n {
		go func() { // ends with its request, which the test makes end
			resp, err := roundTrip(p, newGet(t, url))
			if err == nil {
				resp.Body.Close()
			}
			out <- outcome{err, time.Since(start)}
		}()
	}
	return out
}

// Lease timeouts answer every waiter: 100 callers queued behind a connection
// held, with LeaseTimeout 50 ms, all fail with ErrLeaseTimeout when their
// 50 ms are up (the bubble's clock: no later), nothing stays queued, and a
// lease that crossed a timeout went back to the route.
func TestLeaseTimeoutsAnswerEveryWaiterWhenItsTimeoutIsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipePool(t, PoolConfig{MaxConnsPerRoute: 1, MaxConcurrentRequests: 1024, LeaseTimeout: 50 * time.Millisecond})
		const url = "http://a.test/"
		held, err := roundTrip(p, newGet(t, url))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		out := callers(t, p, url, 100, start)
		synctest.Wait()
		if st := snapshot(t, p); st.Pending != 100 {
			t.Fatalf("%d callers queued, want 100", st.Pending)
		}
		for i := 0; i < 100; i++ {
			o := <-out
			if !errors.Is(o.err, ErrLeaseTimeout) || !errors.Is(o.err, ErrNotSent) {
				t.Fatalf("caller %d: %v", i, o.err)
			}
			if o.at > 100*time.Millisecond {
				t.Fatalf("caller %d answered %v after it queued, want within 100ms", i, o.at)
			}
		}
		synctest.Wait()
		if st := snapshot(t, p); st.Pending != 0 || st.Routes[0].LeaseTimeouts != 100 {
			t.Fatalf("after the timeouts: %d pending, %d lease timeouts", st.Pending, st.Routes[0].LeaseTimeouts)
		}
		io.Copy(io.Discard, held.Body)
		held.Body.Close()
		synctest.Wait()
		if st := snapshot(t, p); st.Idle != 1 || st.Leased != 0 || st.Open != 1 {
			t.Fatalf("after the holder's release: %+v", st)
		}
	})
}

// Close answers every waiter, wherever it waits, with ErrClosed, without a
// timer: ten callers queued for admission (MaxConcurrentRequests), ten in a
// route's FIFO behind a connection held, and five looking up their route
// while the supervisor is held up (one inside its handling, four in its
// mailbox). All are answered at the instant of the bubble's clock at which
// Close was called, and nothing is left running (goleak, in TestMain).
func TestCloseAnswersEveryWaiterWhereverItWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var once sync.Once
		p := newPipePool(t, PoolConfig{MaxConnsPerRoute: 1, MaxConcurrentRequests: 16,
			Fault: func(kind string, msg any) {
				if m, ok := msg.(*RouteRequest); ok && kind == "supervisor" && m.Key.Host == "slow.test" {
					once.Do(func() { <-gate }) // the first lookup holds the supervisor up
				}
			}})
		held, err := roundTrip(p, newGet(t, "http://a.test/"))
		if err != nil {
			t.Fatal(err)
		}
		defer held.Body.Close()
		start := time.Now()
		fifo := callers(t, p, "http://a.test/", 10, start)
		synctest.Wait()
		lookups := callers(t, p, "http://slow.test/", 5, start)
		synctest.Wait()
		admission := callers(t, p, "http://a.test/", 10, start)
		synctest.Wait()
		if held, waiting := p.admission.Held(); held != 16 || waiting != 10 {
			t.Fatalf("admission: %d held, %d waiting; want 16, 10", held, waiting)
		}
		if n := p.cachedRoute(t).Pub.Pending.Load(); n != 10 {
			t.Fatalf("%d callers in the route's FIFO, want 10", n)
		}
		closed := make(chan error, 1)
		go func() { closed <- p.Close(context.Background()) }()
		synctest.Wait() // Close waits for the supervisor, held up by the lookup
		close(gate)
		for name, out := range map[string]chan outcome{"admission": admission, "route FIFO": fifo, "route lookup": lookups} {
			for i := 0; i < cap(out); i++ {
				o := <-out
				if !errors.Is(o.err, ErrClosed) {
					t.Fatalf("%s waiter %d: %v, want ErrClosed", name, i, o.err)
				}
				if o.at > 100*time.Millisecond {
					t.Fatalf("%s waiter %d answered %v after Close, want within 100ms", name, i, o.at)
				}
			}
		}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if _, err := roundTrip(p, newGet(t, "http://a.test/")); !errors.Is(err, ErrClosed) {
			t.Fatalf("a request after Close: %v", err)
		}
	})
}
