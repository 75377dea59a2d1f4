package client

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/connactor/connactor/internal/testkit/footprint"
)

// Clients on the shared system each have their own routes and limits: one
// closed leaves the system, and the other clients, serving; its actors are
// gone from the system, and a client made after it serves too.
func TestClientsOnTheSharedSystemCloseAloneAndLeaveTheirActorsNowhere(t *testing.T) {
	srv := httptest.NewServer(hello)
	t.Cleanup(srv.Close)
	sys := SharedSystem()
	if SharedSystem() != sys {
		t.Fatal("SharedSystem made a second system")
	}
	// The first client on it makes protoactor's guardian of the
	// supervisors' strategy, which stays: counted from there.
	first := newClient(t, Config{System: sys})
	get(t, first, srv.URL)
	first.Close()
	before := footprint.Actors(sys)
	a := newClient(t, Config{System: sys, MaxConnsPerRoute: 1})
	b := newClient(t, Config{System: sys, MaxConnsPerRoute: 3})
	if a.pool.OwnsSystem() || b.pool.OwnsSystem() {
		t.Fatal("a client on the shared system owns it")
	}
	var wg sync.WaitGroup
	for _, c := range []*Client{a, b, a, b, a, b} {
		wg.Go(func() { get(t, c, srv.URL) })
	}
	wg.Wait()
	if st := a.Stats(); st.Open != 1 || len(st.Routes) != 1 {
		t.Fatalf("a: %d open on %d routes, want its own route with its limit of 1", st.Open, len(st.Routes))
	}
	a.Close()
	if got := get(t, b, srv.URL); got != "hello" {
		t.Fatalf("b after a closed: %q", got)
	}
	c := newClient(t, Config{System: sys})
	if got := get(t, c, srv.URL); got != "hello" {
		t.Fatalf("a client made after a closed: %q", got)
	}
	b.Close()
	c.Close()
	if after := footprint.Actors(sys); after != before {
		t.Fatalf("the shared system holds %d actors after its clients closed, had %d", after, before)
	}
}

// protoactor's own records on the shared system go to slog.Default() as it
// is when each is written, tagged lib=protoactor, its INFO as DEBUG.
func TestTheSharedSystemLogsThroughTheDefaultLoggerOfTheMoment(t *testing.T) {
	SharedSystem()
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
	var buf bytes.Buffer
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	SharedSystem().Logger().Info("a record of protoactor's")
	if out := buf.String(); !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "lib=protoactor") ||
		!strings.Contains(out, "a record of protoactor's") {
		t.Fatalf("the default logger set after the system was made got %q", out)
	}
}

// What a client costs to make and close: in an actor system of its own,
// on the shared one, and net/http's Transport, with one request each.
func BenchmarkNewClient(b *testing.B) {
	srv := httptest.NewServer(hello)
	b.Cleanup(srv.Close)
	quiet := slog.New(slog.DiscardHandler)
	one := func(b *testing.B, rt http.RoundTripper) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	b.Run("connactor/own-system", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := New(Config{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			one(b, c)
			c.Close()
		}
	})
	b.Run("connactor/shared-system", func(b *testing.B) {
		b.ReportAllocs()
		sys := SharedSystem()
		for b.Loop() {
			c, err := New(Config{Logger: quiet, System: sys})
			if err != nil {
				b.Fatal(err)
			}
			one(b, c)
			c.Close()
		}
	})
	b.Run("net/http", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tr := &http.Transport{}
			one(b, tr)
			tr.CloseIdleConnections()
		}
	})
}
