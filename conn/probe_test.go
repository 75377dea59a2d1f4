//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package conn

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// waitReadable waits until nc's socket has something to read (bytes or the
// peer's FIN), without consuming it: the event the probe looks for has then
// happened, whatever the scheduler does to loopback delivery.
func waitReadable(t testing.TB, nc net.Conn) {
	t.Helper()
	waitReadableOr[struct{}](t, nc, nil)
}

// waitReadableOr is waitReadable that also ends when or delivers: an idle
// watcher that read the bytes first reports them there.
func waitReadableOr[T any](t testing.TB, nc net.Conn, or <-chan T) {
	t.Helper()
	rc, err := nc.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var buf [1]byte
		var rerr error
		rc.Read(func(fd uintptr) bool {
			_, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			return true
		})
		if rerr != syscall.EAGAIN {
			return
		}
		select {
		case <-or:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing arrived on the socket")
		}
		time.Sleep(time.Millisecond)
	}
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() { // owned by this function, which waits for accepted
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestIdleProbeTellsCleanFromClosedFromUnsolicited(t *testing.T) {
	client, server := tcpPair(t)
	p := newIdleProbe(client)
	if p == nil {
		t.Fatal("no probe for a *net.TCPConn")
	}
	if res, err := p.check(client); res != probeClean || err != nil {
		t.Fatalf("quiet socket: %v, %v; want clean", res, err)
	}
	server.Write([]byte("x"))
	waitReadable(t, client)
	for range 2 { // a peek consumes nothing
		if res, err := p.check(client); res != probeStale || !errors.Is(err, errUnsolicited) {
			t.Fatalf("byte waiting: %v, %v; want stale, unsolicited", res, err)
		}
	}

	client2, server2 := tcpPair(t)
	p2 := newIdleProbe(client2)
	server2.Close()
	waitReadable(t, client2)
	if res, err := p2.check(client2); res != probeStale || !errors.Is(err, errPeerClosed) {
		t.Fatalf("peer closed: %v, %v; want stale, peer closed", res, err)
	}
	client2.Close()
	if res, _ := p2.check(client2); res != probeStale {
		t.Fatalf("closed socket: %v; want stale", res)
	}
}

// countingConn is the wrapper users put in Config.DialContext: it embeds net.Conn.
type countingConn struct {
	net.Conn
	reads int
}

func (c *countingConn) Read(p []byte) (int, error) { c.reads++; return c.Conn.Read(p) }

// swallowingConn stands for a layer with records of its own (TLS): its Read
// consumes whatever arrives and returns nothing of it.
type swallowingConn struct{ inner net.Conn }

func (c *swallowingConn) NetConn() net.Conn { return c.inner }
func (c *swallowingConn) Read(p []byte) (int, error) {
	for {
		if _, err := c.inner.Read(p); err != nil {
			return 0, err
		}
	}
}
func (c *swallowingConn) Write(p []byte) (int, error)        { return c.inner.Write(p) }
func (c *swallowingConn) Close() error                       { return c.inner.Close() }
func (c *swallowingConn) LocalAddr() net.Addr                { return c.inner.LocalAddr() }
func (c *swallowingConn) RemoteAddr() net.Addr               { return c.inner.RemoteAddr() }
func (c *swallowingConn) SetDeadline(t time.Time) error      { return c.inner.SetDeadline(t) }
func (c *swallowingConn) SetReadDeadline(t time.Time) error  { return c.inner.SetReadDeadline(t) }
func (c *swallowingConn) SetWriteDeadline(t time.Time) error { return c.inner.SetWriteDeadline(t) }

func TestIdleProbeReachesTheSocketUnderWrappers(t *testing.T) {
	client, server := tcpPair(t)
	wrapped := &countingConn{Conn: client}
	p := newIdleProbe(wrapped)
	if p == nil || !p.layered {
		t.Fatalf("probe %+v for a struct embedding net.Conn; want a layered probe", p)
	}
	server.Write([]byte("x"))
	waitReadable(t, client)
	if res, err := p.check(wrapped); res != probeStale || !errors.Is(err, errUnsolicited) {
		t.Fatalf("byte under a transparent wrapper: %v, %v; want stale", res, err)
	}
	if newIdleProbe(&swallowingConn{inner: wrapped}) == nil {
		t.Fatal("no probe through NetConn() and an embedded net.Conn")
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if newIdleProbe(a) != nil {
		t.Fatal("a probe for net.Pipe, which has no socket")
	}
}

// Bytes under a layer that turn out to be the layer's own records (a late TLS
// 1.3 NewSessionTicket) leave the connection usable.
func TestIdleProbeLetsALayerConsumeItsOwnRecords(t *testing.T) {
	client, server := tcpPair(t)
	layer := &swallowingConn{inner: client}
	p := newIdleProbe(layer)
	server.Write([]byte("record"))
	waitReadable(t, client)
	if res, err := p.check(layer); res != probeCleanOfLayer || err != nil {
		t.Fatalf("layer records pending: %v, %v; want clean of layer", res, err)
	}
	if res, err := p.check(layer); res != probeClean || err != nil {
		t.Fatalf("after the layer consumed them: %v, %v; want clean", res, err)
	}
}

// Over real TLS: a live connection is clean, whatever tickets the handshake
// left; a server's close_notify and FIN, or application data, are stale.
func TestIdleProbeOverTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	defer srv.Close()
	for _, tc := range []struct {
		name  string
		after func(*tls.Conn)
		want  probeResult
	}{
		{"quiet", func(*tls.Conn) {}, probeClean},
		{"application data", func(s *tls.Conn) { s.Write([]byte("HTTP/1.1 200 OK\r\n")) }, probeStale},
		{"close", func(s *tls.Conn) { s.Close() }, probeStale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rawClient, rawServer := tcpPair(t)
			cert := srv.TLS
			if cert == nil {
				srv.StartTLS()
				cert = srv.TLS
			}
			s := tls.Server(rawServer, cert)
			c := tls.Client(rawClient, &tls.Config{InsecureSkipVerify: true})
			done := make(chan error, 1)
			go func() { done <- s.Handshake() }() // owned by the test, which waits for done
			if err := c.Handshake(); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			// One exchange of application data, as a pooled connection has had.
			go func() { // owned by the test, which waits for done
				buf := make([]byte, 4)
				_, err := io.ReadFull(s, buf)
				if err == nil {
					_, err = s.Write(buf)
				}
				done <- err
			}()
			c.Write([]byte("ping"))
			if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			tc.after(s)
			if tc.want == probeStale {
				waitReadable(t, rawClient)
			}
			p := newIdleProbe(c)
			if p == nil || !p.layered {
				t.Fatalf("probe %+v for *tls.Conn; want a layered probe", p)
			}
			res, err := p.check(c)
			if (res == probeStale) != (tc.want == probeStale) {
				t.Fatalf("%s: %v, %v; want %v", tc.name, res, err, tc.want)
			}
		})
	}
}

// A silent close: a server that closes after its response without saying
// so. Its FIN has arrived when the connection is leased again, inside
// IdleWatchDelay, before any watch looked: a peek before writing finds it, and
// the exchange fails as stale with nothing written, so the client replays it.
func TestExchangeOnAConnectionTheServerClosedWritesNothing(t *testing.T) {
	f := newConnFixture(t)
	closed := make(chan struct{})
	go func() { // owned by the test: ends after one exchange
		defer close(closed)
		br := bufio.NewReader(f.server)
		if _, err := http.ReadRequest(br); err == nil {
			io.WriteString(f.server, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
		f.server.Close()
	}()
	r := f.exchange(t, newGet(t, context.Background()), false)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	io.Copy(io.Discard, r.Resp.Body)
	r.Resp.Body.Close()
	if rel := <-f.release; !rel.reusable {
		t.Fatal("first exchange not reusable")
	}
	f.sys.Root.Send(f.conn, &WatchIdle{}) // armed: the watch would look only after IdleWatchDelay
	<-closed
	waitReadable(t, f.client)
	r = f.exchange(t, newGet(t, context.Background()), true)
	var ee *ExchangeError
	if !errors.As(r.Err, &ee) || ee.Written || !errors.Is(r.Err, ErrStaleConn) || !errors.Is(r.Err, ErrNotSent) {
		t.Fatalf("exchange after the server's close: %v; want ErrStaleConn, nothing written", r.Err)
	}
}

// Response desync: bytes that arrive on an idle connection before its watch
// looked (armed, not yet probing) make it unusable: nothing is written to it.
func TestExchangeAfterUnsolicitedBytesWritesNothing(t *testing.T) {
	f := newConnFixture(t)
	answered, stray := make(chan struct{}), make(chan struct{})
	got := make(chan int, 1)
	go func() { // owned by the test: ends when the fixture closes the server side
		br := bufio.NewReader(f.server)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(f.server, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		close(answered)
		<-stray
		io.WriteString(f.server, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nWRONG")
		close(stray)
		n, _ := io.Copy(io.Discard, br)
		got <- int(n)
	}()
	r := f.exchange(t, newGet(t, context.Background()), false)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	io.Copy(io.Discard, r.Resp.Body)
	r.Resp.Body.Close()
	<-answered
	<-f.release
	f.sys.Root.Send(f.conn, &WatchIdle{})
	stray <- struct{}{}
	<-stray
	waitReadableOr(t, f.client, f.broken) // the watch may have looked first
	r = f.exchange(t, newGet(t, context.Background()), true)
	if !errors.Is(r.Err, ErrStaleConn) || !errors.Is(r.Err, ErrNotSent) {
		t.Fatalf("exchange after unsolicited bytes: %v; want ErrStaleConn, nothing written", r.Err)
	}
	f.server.Close()
	if n := <-got; n != 0 {
		t.Errorf("server received %d bytes after its stray response; want 0", n)
	}
}

// BenchmarkIdleProbe measures the probe paid before each request on a pooled
// connection: one recvfrom(MSG_PEEK|MSG_DONTWAIT) through the poller, on a
// plain TCP socket and under TLS (nothing pending: the usual case).
func BenchmarkIdleProbe(b *testing.B) {
	b.Run("tcp", func(b *testing.B) {
		client, _ := tcpPair(b)
		p := newIdleProbe(client)
		b.ReportAllocs()
		for b.Loop() {
			if res, err := p.check(client); res != probeClean {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("tls", func(b *testing.B) {
		client, _ := tcpPair(b)
		c := tls.Client(client, &tls.Config{InsecureSkipVerify: true})
		p := newIdleProbe(c)
		b.ReportAllocs()
		for b.Loop() {
			if res, err := p.check(c); res != probeClean {
				b.Fatal(res, err)
			}
		}
	})
}
