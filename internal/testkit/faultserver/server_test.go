package faultserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait is the generous bound of every wait for an event: reached only when the
// event never comes.
const wait = 30 * time.Second

func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func waitCounts(t *testing.T, s *Server, what string, cond func(Counts) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := s.Wait(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v (counts %+v)", what, err, s.Counts())
	}
}

// roundTrip writes a GET for id on nc and reads its response with net/http.
func roundTrip(t *testing.T, nc net.Conn, br *bufio.Reader, id string) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(nc, "GET /?id="+id+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestServerAnswersEachRequestAndCountsConnections(t *testing.T) {
	s := start(t, Config{})
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	for _, id := range []string{"a", "b"} {
		if _, body := roundTrip(t, nc, br, id); body != Body(id) {
			t.Fatalf("request %s: body %q", id, body)
		}
	}
	nc.Close()
	waitCounts(t, s, "the close", func(c Counts) bool { return c.Closed == 1 })
	if c := s.Counts(); c.Accepted != 1 || c.Requests != 2 || c.Open() != 0 {
		t.Errorf("counts %+v, want 1 accepted, 2 requests, 0 open", c)
	}
	if conn, ok := s.ConnOf("b"); !ok || conn != 0 {
		t.Errorf("request b on connection %d (%v), want 0", conn, ok)
	}
	if seen := s.Seen(); len(seen) != 2 || seen[1].N != 1 {
		t.Errorf("seen %+v", seen)
	}
}

// peekDontWait asks the kernel, without blocking, whether nc has a byte or the
// end of the stream waiting.
func peekDontWait(t *testing.T, nc net.Conn) (n int, errno error) {
	t.Helper()
	rc, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var buf [1]byte
	rc.Read(func(fd uintptr) bool {
		n, _, errno = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // one try: this is a probe, not a read
	})
	return n, errno
}

func TestWriteAndCloseDeliversTheFINWithTheLastByte(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SKIPPED: TCP_CORK is Linux-only; elsewhere WriteAndClose's FIN may trail its data")
	}
	s := start(t, Config{Handler: func(c *Conn, r *Request) { c.WriteAndClose(OK(r.ID)) }})
	for i := 0; i < 20; i++ {
		nc, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(nc)
		if _, body := roundTrip(t, nc, br, "x"); body != Body("x") {
			t.Fatalf("body %q", body)
		}
		// The whole response is read: the FIN is already in the socket.
		if n, errno := peekDontWait(t, nc); n != 0 || errno != nil {
			t.Fatalf("round %d: after the last byte, a non-blocking peek gave %d bytes, %v; want the end of the stream", i, n, errno)
		}
		nc.Close()
	}
}

func TestResetSendsARST(t *testing.T) {
	s := start(t, Config{Handler: func(c *Conn, r *Request) {
		c.Write(Head("HTTP/1.1 200 OK", "Content-Length: 100") + "part")
		c.Reset()
	}})
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	io.WriteString(nc, "GET /?id=r HTTP/1.1\r\nHost: x\r\n\r\n")
	_, err = io.ReadAll(nc)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after the reset: %v, want ECONNRESET", err)
	}
}

func TestHoldNeverAnswersAndEndsWhenTheClientCloses(t *testing.T) {
	s := start(t, Config{Raw: func(c *Conn) { c.Hold() }})
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	waitCounts(t, s, "the accept", func(c Counts) bool { return c.Accepted == 1 })
	nc.Close()
	waitCounts(t, s, "the close", func(c Counts) bool { return c.Closed == 1 })
	if c := s.Counts(); c.Requests != 0 {
		t.Errorf("a raw connection read %d requests", c.Requests)
	}
}

func TestCloseEndsHandlersThatSleepOrWriteSlowly(t *testing.T) {
	s, err := Start(Config{Handler: func(c *Conn, r *Request) {
		c.WriteSlowly(OK(r.ID), time.Hour)
	}})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	var b [1]byte
	if _, err := io.ReadFull(nc, b[:]); err != nil || b[0] != 'H' {
		t.Fatalf("first slow byte: %q, %v", b, err)
	}
	s.Close() // returns only once the handler has returned
	if c := s.Counts(); c.Open() != 0 {
		t.Errorf("after Close: %+v", c)
	}
}

func TestNXDomainResolverSaysNoSuchHostWithoutTheNetwork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := NXDomainResolver().LookupHost(ctx, "nothing-here.invalid")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Fatalf("lookup: %v, want a not-found *net.DNSError", err)
	}
}

func TestDialerCountsSocketsUntilTheirFirstClose(t *testing.T) {
	s := start(t, Config{})
	d := NewDialer()
	ctx := context.Background()
	a, err := d.DialContext(ctx, "tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.DialContext(ctx, "tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.DialContext(ctx, "tcp", "nothing-here.invalid:80"); err == nil {
		t.Fatal("dialing a .invalid name succeeded")
	}
	a.Close()
	a.Close()
	if _, ok := a.(syscall.Conn); !ok {
		t.Error("a counted socket hides SyscallConn")
	}
	got := d.Counts()
	want := DialerCounts{Open: 1, Peak: 2, Dialed: 2, Closed: 1, Failed: 1}
	if got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	if p := d.PeakPerAddr()[s.Addr()]; p != 2 {
		t.Errorf("peak to %s: %d, want 2", s.Addr(), p)
	}
	b.Close()
}

func TestCertificatesFailVerificationForTheirOwnReason(t *testing.T) {
	good, err := LoopbackCert()
	if err != nil {
		t.Fatal(err)
	}
	expired, err := ExpiredCert()
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := WrongHostCert()
	if err != nil {
		t.Fatal(err)
	}
	handshake := func(c *Cert) error {
		s := start(t, Config{TLS: c.ServerConfig()})
		tc, err := tls.Dial("tcp", s.Addr(), &tls.Config{RootCAs: c.Pool})
		if err == nil {
			tc.Close()
		}
		return err
	}
	if err := handshake(good); err != nil {
		t.Errorf("loopback certificate: %v", err)
	}
	var invalid x509.CertificateInvalidError
	if err := handshake(expired); !errors.As(err, &invalid) || invalid.Reason != x509.Expired {
		t.Errorf("expired certificate: %v", err)
	}
	var host x509.HostnameError
	if err := handshake(wrong); !errors.As(err, &host) {
		t.Errorf("wrong-host certificate: %v", err)
	}
}

func TestHeadJoinsLinesVerbatim(t *testing.T) {
	got := Head("HTTP/1.1 999 Odd", "X: a\x00b", "Y: c") + Chunk("hello")
	want := "HTTP/1.1 999 Odd\r\nX: a\x00b\r\nY: c\r\n\r\n5\r\nhello\r\n"
	if got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if !strings.HasSuffix(OK("7"), "\r\n\r\nreq=7") || !strings.Contains(Chunked("7"), "5\r\nreq=7\r\n0\r\n\r\n") {
		t.Errorf("OK %q, Chunked %q", OK("7"), Chunked("7"))
	}
}
