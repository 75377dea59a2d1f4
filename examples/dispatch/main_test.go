package main

import (
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

func TestDemoEndsEveryRequestAndPrintsTheOutcomeTable(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []string{
		"after AbortAll:  0 leased, 0 pending",
		// route sent response problem aborted server-saw
		`A +60 +48 +0 +12 +5[4-9]`, // the 6 aborted right after Send may have reached the server
		`D +60 +0 +0 +60 +[0-4]\b`, // at most 4 on the wire (MaxConnsPerRoute), the rest left their queue
		`E +60 +0 +60 +0 +0\b`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("output lacks %q", want)
		}
	}
}
