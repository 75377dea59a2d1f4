package errname

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/connactor/connactor/client"
)

func TestOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{io.ErrUnexpectedEOF, ""},
		{client.ErrNotSent, "ErrNotSent"},
		{fmt.Errorf("x: %w", io.EOF), "EOF"},
		{fmt.Errorf("%w: %w", client.ErrOutcomeUnknown, context.DeadlineExceeded), "ErrOutcomeUnknown+DeadlineExceeded"},
	} {
		if got := Of(c.err); got != c.want {
			t.Errorf("Of(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
