package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Errors of the fake request path, as the client's would be.
var (
	errNilRequest = errors.New("fake: nil request")
	errStale      = errors.New("fake: re-used connection closed before any response byte")
	errEarly      = errors.New("fake: response before the request body was sent")
)

// fakeTrip is a RoundTripper without sockets that keeps the client's contract
// (see RoundTripper) and counts where each request and connection went:
//
//   - a request waits for one of the pool's connections, and leaves the queue
//     when its context ends;
//   - once it holds one, it tells its hooks (Leased); a refused connection
//     goes back unused;
//   - it is written and answered by serve; a context that ends while it is on
//     the wire closes the connection, as does any failure;
//   - a failure that serve marks stale is replayed once, if Replaying agrees;
//     a response whose "Early" header is set is told to EarlyResponse first,
//     and its connection is not re-used;
//   - a response body read to EOF, or closed while its context lives, puts
//     the connection back in the pool; closed after its context ended (an
//     abort) or failed, it closes the connection.
type fakeTrip struct {
	pool  chan struct{} // a token per connection; nil = as many as asked for
	serve func(ctx context.Context, req *http.Request) (*http.Response, error)

	queuedCh chan string // each request's path as it starts to wait for a connection, when set
	wireCh   chan string // each request's path as it is written, when set

	left      atomic.Int64 // requests that left the queue: their context ended
	givenBack atomic.Int64 // connections refused by Leased: back unused
	written   atomic.Int64 // requests written
	reused    atomic.Int64 // connections back in the pool after an exchange
	closed    atomic.Int64 // connections closed after an exchange
	held      atomic.Int64 // connections held now
}

// newFakeTrip returns a fake whose pool has conns connections (0 = no limit)
// and whose server answers 200 "ok".
func newFakeTrip(conns int) *fakeTrip {
	f := &fakeTrip{serve: func(context.Context, *http.Request) (*http.Response, error) { return okResponse("ok"), nil }}
	if conns > 0 {
		f.pool = make(chan struct{}, conns)
		for range conns {
			f.pool <- struct{}{}
		}
	}
	return f
}

// hang is a server that never answers: only the end of the request's context
// ends the request.
func hang(ctx context.Context, _ *http.Request) (*http.Response, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func okResponse(body string) *http.Response {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
}

func (f *fakeTrip) RoundTripWithHooks(req *http.Request, hooks Hooks) (*http.Response, error) {
	if req == nil {
		return nil, errNilRequest
	}
	defer closeBody(req)
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		if err := f.lease(ctx, req.URL.Path); err != nil {
			return nil, err
		}
		if err := hooks.Leased(); err != nil {
			f.givenBack.Add(1)
			f.release()
			return nil, err
		}
		f.written.Add(1)
		if f.wireCh != nil {
			f.wireCh <- req.URL.Path
		}
		resp, err := f.serve(ctx, req)
		if err == nil && ctx.Err() != nil {
			resp.Body.Close()
			resp, err = nil, ctx.Err() // the context ended while the head was read
		}
		if err != nil {
			f.closed.Add(1)
			f.release()
			if errors.Is(err, errStale) && attempt == 0 && ctx.Err() == nil && hooks.Replaying(err) {
				continue
			}
			return nil, err
		}
		early := resp.Header.Get("Early") != ""
		resp.Body = &fakeBody{rc: resp.Body, ctx: ctx, f: f, early: early}
		if early && !hooks.EarlyResponse(errEarly) {
			resp.Body.Close() // made fatal: discarded, its connection closed
			return nil, errEarly
		}
		return resp, nil
	}
}

// lease waits for a connection of the pool, or for ctx to end.
func (f *fakeTrip) lease(ctx context.Context, path string) error {
	if f.queuedCh != nil {
		f.queuedCh <- path
	}
	if f.pool != nil {
		select {
		case <-f.pool:
		case <-ctx.Done():
			f.left.Add(1)
			return fmt.Errorf("fake: gave up waiting for a connection: %w", ctx.Err())
		}
	}
	f.held.Add(1)
	return nil
}

func (f *fakeTrip) release() {
	f.held.Add(-1)
	if f.pool != nil {
		f.pool <- struct{}{}
	}
}

// fakeBody is a response body on a fake connection: its end, or its Close,
// decides the connection's fate once.
type fakeBody struct {
	rc    io.ReadCloser
	ctx   context.Context
	f     *fakeTrip
	early bool // an early response: its connection is never re-used
	mu    sync.Mutex
	end   bool
}

func (b *fakeBody) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		b.finish(false)
		return 0, err
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.finish(true)
	case err != nil:
		b.finish(false)
	}
	return n, err
}

// Close puts the connection back, unless the context ended (an abort): then
// it is closed, not drained.
func (b *fakeBody) Close() error {
	b.finish(b.ctx.Err() == nil)
	return b.rc.Close()
}

func (b *fakeBody) finish(reusable bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.end {
		return
	}
	b.end = true
	if reusable && !b.early {
		b.f.reused.Add(1)
	} else {
		b.f.closed.Add(1)
	}
	b.f.release()
}

// blockingBody is a body that gives first, then blocks until ctx ends (a
// stream whose rest never comes).
type blockingBody struct {
	first *strings.Reader
	ctx   context.Context
}

func (b *blockingBody) Read(p []byte) (int, error) {
	if b.first.Len() > 0 {
		return b.first.Read(p)
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

func (b *blockingBody) Close() error { return nil }

// assertSettled fails unless every connection the fake handed out came back,
// and nothing waits for one.
func (f *fakeTrip) assertSettled(t *testing.T) {
	t.Helper()
	if n := f.held.Load(); n != 0 {
		t.Fatalf("%d connections still held", n)
	}
}

// newTestDispatcher returns a Dispatcher on f, and stop, which closes it and
// waits for its goroutines (the test's cleanup calls it too).
func newTestDispatcher(t testing.TB, f RoundTripper, workers int, log slog.Handler) (d *Dispatcher, stop func()) {
	t.Helper()
	if log == nil {
		log = slog.DiscardHandler
	}
	var wg sync.WaitGroup
	d = New(Config{RoundTrip: f, Workers: workers, Go: wg.Go, Logger: slog.New(log), ErrClosed: errClosed})
	stop = sync.OnceFunc(func() {
		d.Close()
		wg.Wait()
	})
	t.Cleanup(stop)
	return d, stop
}

var errClosed = errors.New("fake: client closed")

func newGet(t testing.TB, path string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://fake.test"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// tally is a Handler that counts each Handle's final notifications, and the
// non-fatal ones; it reads and closes each response.
type tally struct {
	mu       sync.Mutex
	finals   map[*Handle]int
	nonFatal int
	done     sync.WaitGroup // one Done per final notification
}

func newTally(finals int) *tally {
	t := &tally{finals: map[*Handle]int{}}
	t.done.Add(finals)
	return t
}

func (t *tally) OnResponse(h *Handle, resp *http.Response) {
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	t.final(h)
}

func (t *tally) OnProblem(h *Handle, _ error, fatal bool) bool {
	if !fatal {
		t.mu.Lock()
		t.nonFatal++
		t.mu.Unlock()
		return false
	}
	t.final(h)
	return false
}

func (t *tally) final(h *Handle) {
	t.mu.Lock()
	t.finals[h]++
	t.mu.Unlock()
	t.done.Done()
}

// counter is a Handler that counts every notification: for Handles that must
// get none.
type counter struct{ n atomic.Int64 }

func (c *counter) OnResponse(*Handle, *http.Response)  { c.n.Add(1) }
func (c *counter) OnProblem(*Handle, error, bool) bool { c.n.Add(1); return false }

// panicRecords is a slog.Handler that counts the records of handler panics.
type panicRecords struct{ n atomic.Int64 }

func (p *panicRecords) Enabled(context.Context, slog.Level) bool { return true }
func (p *panicRecords) WithAttrs([]slog.Attr) slog.Handler       { return p }
func (p *panicRecords) WithGroup(string) slog.Handler            { return p }

func (p *panicRecords) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "connactor: notification handler panicked" {
		p.n.Add(1)
	}
	return nil
}
