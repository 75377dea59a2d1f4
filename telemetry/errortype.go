package telemetry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// Values of the error.type attribute of a failed request (its span and
// http.client.request.duration) and of connactor.connection.dial_errors. They
// say what happened in a few words, never a Go type name: a dashboard groups
// by them. A response with status 400 or more has the status code as its
// error.type instead (semantic conventions, HTTP client spans).
const (
	// Kinds ErrorType recognises in the standard library's errors.
	ErrorTypeCanceled          = "canceled"           // the caller's context was canceled
	ErrorTypeTimeout           = "timeout"            // a deadline passed (context, net.Error Timeout())
	ErrorTypeConnRefused       = "connection_refused" // ECONNREFUSED: nothing listens there
	ErrorTypeConnReset         = "connection_reset"   // ECONNRESET, ECONNABORTED: the peer tore the connection down
	ErrorTypeBrokenPipe        = "broken_pipe"        // EPIPE: written after the peer closed
	ErrorTypeUnreachable       = "host_unreachable"   // EHOSTUNREACH, ENETUNREACH
	ErrorTypeDNS               = "dns"                // the name did not resolve (*net.DNSError)
	ErrorTypeTLS               = "tls"                // certificate verification or handshake
	ErrorTypeUnexpectedEOF     = "unexpected_eof"     // the connection ended before the response did
	ErrorTypeOther             = "_OTHER"             // nothing more precise is known
	ErrorTypeResponseTooLarge  = "response_header_too_large"
	ErrorTypeHeaderTimeout     = "response_header_timeout"
	ErrorTypeLeaseTimeout      = "lease_timeout"     // no connection within Config.LeaseTimeout
	ErrorTypeQueueFull         = "queue_full"        // the route's wait queue was full
	ErrorTypeRouteUnavailable  = "route_unavailable" // dials to the route keep failing
	ErrorTypeOverloaded        = "overloaded"        // shed from the route's standing queue (Config.QueueTarget)
	ErrorTypeProxyRefused      = "proxy_refused"     // the proxy refused the CONNECT tunnel
	ErrorTypeClosed            = "closed"            // the client was closed
	ErrorTypeNotSent           = "not_sent"          // generic: failed before anything was written
	ErrorTypeOutcomeUnknown    = "outcome_unknown"   // generic: failed after the request was (partly) written
	ErrorTypeInvalidRequest    = "invalid_request"   // refused before anything was written
	ErrorTypeUnsupportedScheme = "unsupported_scheme"
)

// ErrorTyper is implemented by errors that know their error.type: connactor's
// own sentinels and error types implement it with the values above (its
// ErrNotSent and ErrOutcomeUnknown with the generic ErrorTypeNotSent and
// ErrorTypeOutcomeUnknown), and so may a caller's errors (a request body's
// read error, for one). An ErrorType of "" has no opinion: the error's causes
// decide, which suits wrappers such as an exchange error around a
// *net.OpError.
type ErrorTyper interface {
	ErrorType() string
}

// ErrorType returns the error.type of a transport failure err. Causes are
// found through the whole chain (Unwrap() error and Unwrap() []error), and the
// most telling kind wins, in this order:
//
//  1. canceled: the caller's context was canceled, whatever else went wrong
//     as a consequence;
//  2. the first ErrorType() of the chain (outermost first) other than "" and
//     the generic not_sent and outcome_unknown: connactor's own kinds
//     (lease_timeout, queue_full, proxy_refused, ...) and the caller's;
//  3. the first standard kind of the chain: timeout, dns, tls,
//     connection_refused, connection_reset, broken_pipe, host_unreachable,
//     unexpected_eof;
//  4. not_sent or outcome_unknown, which say only how far the request got;
//  5. _OTHER.
//
// It allocates nothing; nil gives _OTHER.
func ErrorType(err error) string {
	if err == nil {
		return ErrorTypeOther
	}
	if errors.Is(err, context.Canceled) {
		return ErrorTypeCanceled
	}
	var c classified
	c.walk(err, 0)
	switch {
	case c.own != "":
		return c.own
	case c.std != "":
		return c.std
	case c.generic != "":
		return c.generic
	}
	return ErrorTypeOther
}

// classified collects the first value of each rank while walking a chain.
type classified struct {
	own, std, generic string
}

// maxDepth bounds the walk: an error chain is short, a cycle is a bug.
const maxDepth = 32

func (c *classified) walk(err error, depth int) {
	if err == nil || depth > maxDepth || c.own != "" {
		return
	}
	if t, ok := err.(ErrorTyper); ok {
		switch v := t.ErrorType(); v {
		case "":
		case ErrorTypeNotSent, ErrorTypeOutcomeUnknown:
			if c.generic == "" {
				c.generic = v
			}
		default:
			c.own = v
			return
		}
	}
	if c.std == "" {
		c.std = standardKind(err)
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		c.walk(u.Unwrap(), depth+1)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			c.walk(e, depth+1)
		}
	}
}

// standardKind classifies one link of a chain by the standard library's
// types and values ("" when it says nothing itself).
func standardKind(err error) string {
	if err == context.DeadlineExceeded {
		return ErrorTypeTimeout
	}
	if t, ok := err.(interface{ Timeout() bool }); ok && t.Timeout() {
		return ErrorTypeTimeout
	}
	switch e := err.(type) {
	case syscall.Errno:
		switch e {
		case syscall.ECONNREFUSED:
			return ErrorTypeConnRefused
		case syscall.ECONNRESET, syscall.ECONNABORTED:
			return ErrorTypeConnReset
		case syscall.EPIPE:
			return ErrorTypeBrokenPipe
		case syscall.EHOSTUNREACH, syscall.ENETUNREACH:
			return ErrorTypeUnreachable
		}
		return ""
	case *net.DNSError:
		return ErrorTypeDNS
	case *net.OpError:
		// crypto/tls reports an alert the peer sent as a "remote error"
		// (and one it sent itself as a "local error", whose cause reads "tls: ...").
		if e.Op == "remote error" {
			return ErrorTypeTLS
		}
		return ""
	case *tls.CertificateVerificationError, tls.RecordHeaderError, *tls.RecordHeaderError, tls.AlertError,
		*tls.ECHRejectionError, x509.UnknownAuthorityError, *x509.UnknownAuthorityError, x509.HostnameError,
		*x509.HostnameError, x509.CertificateInvalidError, *x509.CertificateInvalidError, x509.SystemRootsError,
		*x509.SystemRootsError, x509.ConstraintViolationError, x509.UnhandledCriticalExtension,
		x509.InsecureAlgorithmError:
		return ErrorTypeTLS
	}
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		return ErrorTypeUnexpectedEOF
	}
	// Every error crypto/tls makes reads "tls: ..."; most are unexported
	// values. Only a link without a cause is read, so that a wrapper's
	// wording cannot pass for one.
	if _, wraps := err.(interface{ Unwrap() error }); !wraps && strings.HasPrefix(err.Error(), "tls: ") {
		return ErrorTypeTLS
	}
	return ""
}
