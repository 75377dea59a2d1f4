package hedge

import (
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestPolicyZeroFieldsTakeTheDefaults(t *testing.T) {
	got := Policy{}.WithDefaults()
	want := Policy{Percentile: 0.95, MaxAttempts: 2, Budget: 0.1}
	if got != want {
		t.Fatalf("defaults = %+v, want %+v", got, want)
	}
	set := Policy{Delay: time.Millisecond, Percentile: 0.5, MaxAttempts: 3, Budget: 0.3}
	if got := set.WithDefaults(); got != set {
		t.Fatalf("set fields changed: %+v, want %+v", got, set)
	}
}

func TestPolicyValidateRejectsWhatIsOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
		bad  string // the field the error names; "" = valid
	}{
		{"zero value", Policy{}, ""},
		{"five attempts", Policy{MaxAttempts: 5}, ""},
		{"one attempt", Policy{MaxAttempts: 1}, ""},
		{"fixed delay", Policy{Delay: 3 * time.Millisecond}, ""},
		{"negative delay", Policy{Delay: -1}, "Delay"},
		{"percentile 1", Policy{Percentile: 1}, "Percentile"},
		{"negative percentile", Policy{Percentile: -0.5}, "Percentile"},
		{"percentile NaN", Policy{Percentile: math.NaN()}, "Percentile"},
		{"six attempts", Policy{MaxAttempts: 6}, "MaxAttempts"},
		{"negative attempts", Policy{MaxAttempts: -1}, "MaxAttempts"},
		{"negative budget", Policy{Budget: -0.1}, "Budget"},
		{"budget NaN", Policy{Budget: math.NaN()}, "Budget"},
		{"budget infinite", Policy{Budget: math.Inf(1)}, "Budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			switch {
			case tc.bad == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tc.bad != "" && (!errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), tc.bad)):
				t.Fatalf("Validate = %v, want ErrInvalidPolicy naming %s", err, tc.bad)
			}
		})
	}
}

func TestEligibleFollowsNetHTTPsReplayRule(t *testing.T) {
	body := func() io.ReadCloser { return io.NopCloser(strings.NewReader("x")) }
	for _, tc := range []struct {
		name   string
		method string
		header http.Header
		body   io.ReadCloser
		getter bool
		want   bool
	}{
		{"GET", "GET", nil, nil, false, true},
		{"empty method is GET", "", nil, nil, false, true},
		{"HEAD", "HEAD", nil, nil, false, true},
		{"OPTIONS", "OPTIONS", nil, nil, false, true},
		{"TRACE", "TRACE", nil, nil, false, true},
		{"POST", "POST", nil, nil, false, false},
		{"DELETE is not in the rule", "DELETE", nil, nil, false, false},
		{"POST with Idempotency-Key", "POST", http.Header{"Idempotency-Key": {"k"}}, nil, false, true},
		{"POST with X-Idempotency-Key", "POST", http.Header{"X-Idempotency-Key": {"k"}}, nil, false, true},
		{"an empty key counts, as in net/http", "POST", http.Header{"Idempotency-Key": nil}, nil, false, true},
		{"POST with a body and GetBody", "POST", http.Header{"Idempotency-Key": {"k"}}, body(), true, true},
		{"GET with NoBody", "GET", nil, http.NoBody, false, true},
		{"GET with a body that cannot be read again", "GET", nil, body(), false, false},
		{"GET with a body and GetBody", "GET", nil, body(), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &http.Request{Method: tc.method, Header: tc.header, Body: tc.body}
			if tc.getter {
				r.GetBody = func() (io.ReadCloser, error) { return body(), nil }
			}
			if got := Eligible(r); got != tc.want {
				t.Fatalf("Eligible = %v, want %v", got, tc.want)
			}
		})
	}
}
