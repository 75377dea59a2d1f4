package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestQuickstartRunsWithinItsLimitsAndReports(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, 3, 600, 40, 2, 4); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"600 requests", "requests ok 600, failed 0", "LRU evictions", "all limits held"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}
