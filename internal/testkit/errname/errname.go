// Package errname names a connactor error by the sentinels it matches
// (errors.Is against client/errors.go, context and a few socket errors), for
// the reports of the fault matrix (test/faults) and the soak (cmd/soak).
package errname

import (
	"context"
	"errors"
	"io"
	"strings"
	"syscall"

	"github.com/connactor/connactor/client"
)

// sentinels are matched in this order: connactor's, then the context's, then
// the socket's.
var sentinels = []struct {
	name string
	err  error
}{
	{"ErrNotSent", client.ErrNotSent},
	{"ErrOutcomeUnknown", client.ErrOutcomeUnknown},
	{"ErrResponseHeaderTimeout", client.ErrResponseHeaderTimeout},
	{"ErrResponseHeaderTooLarge", client.ErrResponseHeaderTooLarge},
	{"ErrStaleConn", client.ErrStaleConn},
	{"ErrLeaseTimeout", client.ErrLeaseTimeout},
	{"ErrClosed", client.ErrClosed},
	{"Canceled", context.Canceled},
	{"DeadlineExceeded", context.DeadlineExceeded},
	{"ECONNRESET", syscall.ECONNRESET},
	{"EPIPE", syscall.EPIPE},
	{"EOF", io.EOF},
}

// Of returns the names of the sentinels err matches, joined by "+" ("" for
// none).
func Of(err error) string {
	var names []string
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			names = append(names, s.name)
		}
	}
	return strings.Join(names, "+")
}
