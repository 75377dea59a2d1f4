package conn

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/internal/testkit/faultserver"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

// connFixture runs one connection actor, dialed to a local listener, under a
// parent actor that forwards what the connection reports.
type connFixture struct {
	sys     *actor.ActorSystem
	conn    *actor.PID
	server  net.Conn // the accepted side
	client  net.Conn // the dialed side, as the actor holds it
	dialed  chan *Dialed
	broken  chan *IdleBroken
	wg      sync.WaitGroup
	cancel  context.CancelFunc
	opt     *Options
	release chan releaseResult
}

type releaseResult struct {
	reusable bool
	idle     time.Duration
	failure  error
}

// releaseTo is the fixture's Ender: it hands each end to its channel.
type releaseTo chan releaseResult

func (c releaseTo) ExchangeEnded(reusable bool, idle time.Duration, failure error) {
	c <- releaseResult{reusable, idle, failure}
}

// newConnFixture starts the fixture; each of opts may change the connection's
// Options before the actor is spawned.
func newConnFixture(t *testing.T, opts ...func(*Options)) *connFixture {
	t.Helper()
	return newConnFixtureTLS(t, nil, opts...)
}

// newConnFixtureTLS is newConnFixture for an https route when srv is not nil:
// the accepted side is a TLS server with srv's configuration, handshaken.
func newConnFixtureTLS(t *testing.T, srv *tls.Config, opts ...func(*Options)) *connFixture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	f := &connFixture{dialed: make(chan *Dialed, 1), broken: make(chan *IdleBroken, 1), release: make(chan releaseResult, 4)}
	f.opt = &Options{DialTimeout: 5 * time.Second, MaxResponseHeaderBytes: 1 << 20, ExpectContinueTimeout: time.Second,
		Go: func(fn func()) {
			f.wg.Add(1)
			go func() { // owned by f.wg, waited for in cleanup
				defer f.wg.Done()
				fn()
			}()
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	f.opt.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		f.client = nc // read by the test after Dialed arrives
		return nc, err
	}
	for _, o := range opts {
		o(f.opt)
	}
	life, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return f.opt.Logger }))
	key := route.Key{Scheme: "http", Host: host, Port: port}
	if srv != nil {
		key.Scheme = "https"
	}
	spawned := make(chan *actor.PID, 1)
	f.sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			spawned <- ctx.Spawn(Props(1, key, f.opt, life))
		case *Dialed:
			f.dialed <- m
		case *IdleBroken:
			f.broken <- m
		}
	}))
	f.conn = <-spawned
	if f.server, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	if srv != nil { // the client's side of the handshake runs on its dial worker
		ts := tls.Server(f.server, srv)
		if err := ts.Handshake(); err != nil {
			t.Fatal(err)
		}
		f.server = ts
	}
	if d := <-f.dialed; d.Err != nil {
		t.Fatal(d.Err)
	}
	t.Cleanup(func() {
		f.server.Close()
		f.sys.Root.StopFuture(f.conn).Wait()
		cancel()
		f.wg.Wait()
		f.sys.Shutdown()
	})
	return f
}

// exchange sends an ExchangeRequest and returns its answer.
func (f *connFixture) exchange(t *testing.T, req *http.Request, reused bool) ExchangeResponse {
	t.Helper()
	reply := &wait.Ticket[ExchangeResponse]{}
	f.sys.Root.Send(f.conn, &ExchangeRequest{ConnID: 1, Req: req, Reused: reused, Reply: reply,
		Done: releaseTo(f.release)})
	select {
	case <-reply.Ready():
		r, _, _ := reply.Result()
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no answer to the exchange")
		return ExchangeResponse{}
	}
}

// firstOfStalledBody runs a GET whose response declares 100 bytes of body
// and sends 5 ("first"), which it returns read: the rest never comes.
func (f *connFixture) firstOfStalledBody(t *testing.T) ExchangeResponse {
	t.Helper()
	go func() { // owned by the test: ends when the fixture closes the server side
		br := bufio.NewReader(f.server)
		if _, err := http.ReadRequest(br); err == nil {
			io.WriteString(f.server, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfirst")
			io.Copy(io.Discard, br) // stalls: the rest of the body never comes
		}
	}()
	r := f.exchange(t, newGet(t, context.Background()), false)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, err := io.ReadFull(r.Resp.Body, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	return r
}

func newGet(t *testing.T, ctx context.Context) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://example.test/", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestIdleWatchReportsServerCloseAndExchangeRefusesStaleConnection(t *testing.T) {
	f := newConnFixture(t)
	go func() { // owned by the test: ends when the fixture closes the server side
		br := bufio.NewReader(f.server)
		if _, err := http.ReadRequest(br); err == nil {
			io.WriteString(f.server, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	}()
	r := f.exchange(t, newGet(t, context.Background()), false)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	io.Copy(io.Discard, r.Resp.Body)
	if rel := <-f.release; !rel.reusable {
		t.Fatal("a complete HTTP/1.1 exchange was not reusable")
	}
	f.sys.Root.Send(f.conn, &WatchIdle{})
	f.server.Close()
	select {
	case b := <-f.broken:
		if !errors.Is(b.Err, io.EOF) {
			t.Errorf("IdleBroken: %v; want EOF", b.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the idle watch did not report the server's close")
	}
	// The route would discard it; a lease that raced the report finds it stale
	// before writing anything.
	r = f.exchange(t, newGet(t, context.Background()), true)
	var ee *ExchangeError
	if !errors.As(r.Err, &ee) || ee.Written || !errors.Is(r.Err, ErrStaleConn) || !errors.Is(r.Err, ErrNotSent) {
		t.Fatalf("exchange on a stale connection: %v; want ErrStaleConn, nothing written", r.Err)
	}
}

// A body the server cuts short after a good head ends its exchange with the
// read's error as its failure (the outlier rule counts it); a body its
// holder closes early, or whose request's context ends, has none: those
// say nothing of the server.
func TestTheEndOfABodyCutShortByItsServerCarriesTheFailure(t *testing.T) {
	t.Run("cut short", func(t *testing.T) {
		f := newConnFixture(t)
		r := f.firstOfStalledBody(t)
		f.server.Close() // 95 bytes short
		if _, err := io.ReadAll(r.Resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("read: %v, want io.ErrUnexpectedEOF", err)
		}
		if rel := <-f.release; rel.reusable || !errors.Is(rel.failure, io.ErrUnexpectedEOF) {
			t.Fatalf("end %+v, want not reusable, failed with io.ErrUnexpectedEOF", rel)
		}
	})
	t.Run("closed by its holder", func(t *testing.T) {
		f := newConnFixture(t)
		r := f.firstOfStalledBody(t)
		r.Resp.Body.Close()
		if rel := <-f.release; rel.failure != nil {
			t.Fatalf("end %+v, want no failure", rel)
		}
	})
	t.Run("its context ended", func(t *testing.T) {
		f := newConnFixture(t)
		go func() { // owned by the test: ends when the fixture closes the server side
			br := bufio.NewReader(f.server)
			if _, err := http.ReadRequest(br); err == nil {
				io.WriteString(f.server, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfirst")
				io.Copy(io.Discard, br)
			}
		}()
		ctx, cancel := context.WithCancel(context.Background())
		r := f.exchange(t, newGet(t, ctx), false)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		io.ReadFull(r.Resp.Body, make([]byte, 5))
		cancel()
		if _, err := io.ReadAll(r.Resp.Body); !errors.Is(err, context.Canceled) {
			t.Fatalf("read: %v, want context.Canceled", err)
		}
		if rel := <-f.release; rel.failure != nil {
			t.Fatalf("end %+v, want no failure", rel)
		}
	})
}

func TestClosingBodyDuringBlockedReadInterruptsIt(t *testing.T) {
	f := newConnFixture(t)
	r := f.firstOfStalledBody(t)
	buf := make([]byte, 5)
	readErr := make(chan error, 1)
	go func() { // owned by the test, which waits for readErr
		_, err := r.Resp.Body.Read(buf)
		readErr <- err
	}()
	r.Resp.Body.Close()
	select {
	case err := <-readErr:
		if !errors.Is(err, errBodyClosed) {
			t.Errorf("blocked Read after Close: %v; want errBodyClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the blocked Read")
	}
	if rel := <-f.release; rel.reusable {
		t.Error("a body closed mid-read left its connection reusable")
	}
	select {
	case rel := <-f.release:
		t.Errorf("Done called twice (second: %+v)", rel)
	default:
	}
}

func TestContextEndInterruptsHeadRead(t *testing.T) {
	f := newConnFixture(t)
	go func() { // owned by the test: ends when the fixture closes the server side
		io.Copy(io.Discard, f.server) // reads the request, never answers
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r := f.exchange(t, newGet(t, ctx), false)
	if !errors.Is(r.Err, context.DeadlineExceeded) || !errors.Is(r.Err, ErrOutcomeUnknown) {
		t.Fatalf("exchange past its deadline: %v; want DeadlineExceeded, outcome unknown", r.Err)
	}
	var ne net.Error
	if !errors.As(r.Err, &ne) || !ne.Timeout() {
		t.Errorf("%v is not a net.Error timeout", r.Err)
	}
	if !strings.Contains(r.Err.Error(), "read") {
		t.Errorf("error %q does not say the read failed", r.Err)
	}
}

// A slow head: when ResponseHeaderTimeout fires after part of a line has
// arrived, bufio hands the partial line to ReadResponse without the timeout
// ("malformed HTTP response \"HTT\""). Whatever the parser makes of it, a head
// that missed its deadline is ErrResponseHeaderTimeout.
func TestResponseHeaderTimeoutInTheMiddleOfALine(t *testing.T) {
	for _, partial := range []string{"HTT", "HTTP/1.1 200 OK\r\nX-Partial: ab", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"} {
		t.Run(strings.TrimSpace(partial), func(t *testing.T) {
			f := newConnFixture(t, func(o *Options) { o.ResponseHeaderTimeout = 200 * time.Millisecond })
			go func() { // owned by the test: ends when the fixture closes the server side
				br := bufio.NewReader(f.server)
				if _, err := http.ReadRequest(br); err == nil {
					io.WriteString(f.server, partial)
					io.Copy(io.Discard, br) // and nothing more
				}
			}()
			r := f.exchange(t, newGet(t, context.Background()), false)
			if !errors.Is(r.Err, ErrResponseHeaderTimeout) || !errors.Is(r.Err, ErrOutcomeUnknown) {
				t.Fatalf("head cut at %q: %v; want ErrResponseHeaderTimeout, outcome unknown", partial, r.Err)
			}
			var ne net.Error
			if !errors.As(r.Err, &ne) || !ne.Timeout() {
				t.Errorf("%v is not a net.Error timeout", r.Err)
			}
		})
	}
}

// stallConn is a socket whose writes block, regardless of deadlines, once
// stall is set, until it is closed: a peer that stopped reading, with the
// send buffer full.
type stallConn struct {
	net.Conn
	stall  atomic.Bool
	closed chan struct{}
	once   sync.Once
}

func (c *stallConn) Write(p []byte) (int, error) {
	if c.stall.Load() {
		<-c.closed
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

func (c *stallConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// A body closed before its end on a TLS connection closes the socket without
// writing a close_notify alert first: tls.Conn.Close would block on a peer
// that stopped reading (for up to 5 s with a deadline the socket honours,
// here for ever), and Body.Close must not.
func TestBodyCloseOnTLSDoesNotWaitToSendAnAlert(t *testing.T) {
	cert, err := faultserver.NewCert(faultserver.CertSpec{IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var sc *stallConn
	f := newConnFixtureTLS(t, cert.ServerConfig(), func(o *Options) {
		o.TLSConfig = &tls.Config{RootCAs: cert.Pool}
		dial := o.DialContext
		o.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			sc = &stallConn{Conn: nc, closed: make(chan struct{})} // read by the test after Dialed
			return sc, nil
		}
	})
	r := f.firstOfStalledBody(t)
	sc.stall.Store(true)
	closed := make(chan error, 1)
	go func() { closed <- r.Resp.Body.Close() }() // owned by the test, which waits for closed
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		sc.Close() // lets the test end
		t.Fatal("Body.Close blocked writing a TLS alert to a peer that does not read")
	}
	if rel := <-f.release; rel.reusable {
		t.Error("a body closed before its end left its connection reusable")
	}
}
