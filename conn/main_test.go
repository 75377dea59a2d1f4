package conn

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// EnderFunc adapts a function to Ender, for the tests' exchanges.
type EnderFunc func(reusable bool, idle time.Duration)

// ExchangeEnded calls f (failureEnder checks the failure).
func (f EnderFunc) ExchangeEnded(reusable bool, idle time.Duration, _ error) { f(reusable, idle) }
