package telemetry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"
)

// typed is an error that names its own error.type and wraps causes, the way
// connactor's error types and sentinels do.
type typed struct {
	kind   string
	causes []error
}

func (e *typed) Error() string     { return "typed " + e.kind }
func (e *typed) ErrorType() string { return e.kind }
func (e *typed) Unwrap() []error   { return e.causes }

// timeoutTyped is a timeout that names itself, like ErrLeaseTimeout.
type timeoutTyped struct{ kind string }

func (e timeoutTyped) Error() string     { return e.kind }
func (e timeoutTyped) ErrorType() string { return e.kind }
func (e timeoutTyped) Timeout() bool     { return true }

func sysErr(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, errno)}
}

var (
	notSentSentinel        = &typed{kind: ErrorTypeNotSent}
	outcomeUnknownSentinel = &typed{kind: ErrorTypeOutcomeUnknown}
)

// exchangeErr is shaped like conn.ExchangeError: no opinion of its own, its
// cause and a generic sentinel.
func exchangeErr(cause, sentinel error) error {
	return &typed{kind: "", causes: []error{cause, sentinel}}
}

func TestErrorTypeSaysWhatHappenedInAFewWords(t *testing.T) {
	refused := sysErr("dial", syscall.ECONNREFUSED)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ErrorTypeOther},
		{"unknown", errors.New("boom"), ErrorTypeOther},
		{"caller canceled", fmt.Errorf("x: %w", context.Canceled), ErrorTypeCanceled},
		{"canceled beats what the cancellation caused",
			fmt.Errorf("%w: %w", context.Canceled, exchangeErr(sysErr("read", syscall.ECONNRESET), outcomeUnknownSentinel)),
			ErrorTypeCanceled},
		{"context deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), ErrorTypeTimeout},
		{"socket deadline", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, ErrorTypeTimeout},
		{"refused", refused, ErrorTypeConnRefused},
		{"reset", sysErr("read", syscall.ECONNRESET), ErrorTypeConnReset},
		{"aborted", sysErr("read", syscall.ECONNABORTED), ErrorTypeConnReset},
		{"broken pipe", sysErr("write", syscall.EPIPE), ErrorTypeBrokenPipe},
		{"host unreachable", sysErr("dial", syscall.EHOSTUNREACH), ErrorTypeUnreachable},
		{"network unreachable", sysErr("dial", syscall.ENETUNREACH), ErrorTypeUnreachable},
		{"dns", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "x.test", IsNotFound: true}},
			ErrorTypeDNS},
		{"dns timeout is a timeout", &net.DNSError{Err: "i/o timeout", Name: "x.test", IsTimeout: true}, ErrorTypeTimeout},
		{"certificate", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, ErrorTypeTLS},
		{"host name", fmt.Errorf("x: %w", x509.HostnameError{Host: "x.test"}), ErrorTypeTLS},
		{"expired", x509.CertificateInvalidError{Reason: x509.Expired}, ErrorTypeTLS},
		{"not tls", tls.RecordHeaderError{Msg: "tls: first record does not look like a TLS handshake"}, ErrorTypeTLS},
		{"alert from the peer", &net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}, ErrorTypeTLS},
		{"crypto/tls's unexported errors", fmt.Errorf("handshake: %w", errors.New("tls: handshake failure")), ErrorTypeTLS},
		{"a wrapper's wording is not a tls error", fmt.Errorf("tls: %w", errors.New("boom")), ErrorTypeOther},
		{"eof", io.EOF, ErrorTypeUnexpectedEOF},
		{"truncated", fmt.Errorf("body: %w", io.ErrUnexpectedEOF), ErrorTypeUnexpectedEOF},
		{"through url.Error", &url.Error{Op: "Get", URL: "http://x.test/", Err: refused}, ErrorTypeConnRefused},
		{"the cause beats not_sent", exchangeErr(refused, notSentSentinel), ErrorTypeConnRefused},
		{"the cause beats outcome_unknown", exchangeErr(io.ErrUnexpectedEOF, outcomeUnknownSentinel), ErrorTypeUnexpectedEOF},
		{"not_sent when nothing says more", exchangeErr(errors.New("boom"), notSentSentinel), ErrorTypeNotSent},
		{"outcome_unknown when nothing says more", exchangeErr(errors.New("boom"), outcomeUnknownSentinel), ErrorTypeOutcomeUnknown},
		{"connactor's kind beats a timeout", fmt.Errorf("x: %w", timeoutTyped{ErrorTypeLeaseTimeout}), ErrorTypeLeaseTimeout},
		{"connactor's kind beats its causes", &typed{kind: ErrorTypeProxyRefused, causes: []error{refused, notSentSentinel}},
			ErrorTypeProxyRefused},
		{"connactor's kind found under a generic wrapper",
			exchangeErr(&typed{kind: ErrorTypeHeaderTimeout, causes: []error{os.ErrDeadlineExceeded}}, outcomeUnknownSentinel),
			ErrorTypeHeaderTimeout},
		{"the outermost kind wins", &typed{kind: ErrorTypeQueueFull, causes: []error{&typed{kind: ErrorTypeClosed}}},
			ErrorTypeQueueFull},
		{"a caller's own kind", fmt.Errorf("body: %w", &typed{kind: "body_read"}), "body_read"},
	} {
		if got := ErrorType(c.err); got != c.want {
			t.Errorf("%s: ErrorType(%v) = %q, want %q", c.name, c.err, got, c.want)
		}
	}
}

func TestErrorTypeClassifiesRealFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = net.DialTimeout("tcp", addr, 10*time.Second)
	if got := ErrorType(err); got != ErrorTypeConnRefused {
		t.Errorf("dialing a closed port: ErrorType(%v) = %q, want %q", err, got, ErrorTypeConnRefused)
	}

	srv := httptest.NewTLSServer(nil)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake error the test causes
	defer srv.Close()
	_, err = tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", srv.Listener.Addr().String(),
		&tls.Config{ServerName: "example.test"})
	if got := ErrorType(err); got != ErrorTypeTLS {
		t.Errorf("an unknown certificate: ErrorType(%v) = %q, want %q", err, got, ErrorTypeTLS)
	}

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	a.SetReadDeadline(time.Now().Add(-time.Second))
	_, err = a.Read(make([]byte, 1))
	if got := ErrorType(err); got != ErrorTypeTimeout {
		t.Errorf("a read past its deadline: ErrorType(%v) = %q, want %q", err, got, ErrorTypeTimeout)
	}
}
