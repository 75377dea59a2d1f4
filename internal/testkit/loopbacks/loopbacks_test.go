package loopbacks

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// get sends one request to a, on a connection of its own.
func get(t *testing.T, s *Server, a netip.Addr) error {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + s.AddrPort(a).String() + "/")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	return err
}

// Each address serves on the one port and counts its own connections and
// requests; one taken down refuses, and serves again once brought up.
func TestEachAddressServesAndCountsOnItsOwn(t *testing.T) {
	if !Available() {
		t.Skip("SKIPPED: this machine cannot listen on 127.0.0.2")
	}
	a, b := Addr(2), Addr(3)
	s, err := Start(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }), Options{}, a, b)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, x := range []netip.Addr{a, a, b} {
		if err := get(t, s, x); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Wait(ctx, func(c map[netip.Addr]Counts) bool { return c[a].Closed == 2 && c[b].Closed == 1 }); err != nil {
		t.Fatalf("counts %v: %v", s.Counts(), err)
	}
	if c := s.Counts(); c[a].Requests != 2 || c[b].Requests != 1 || c[a].Open() != 0 {
		t.Fatalf("counts %v, want 2 requests at a and 1 at b", c)
	}
	s.Down(a)
	var op *net.OpError
	if err := get(t, s, a); !errors.As(err, &op) {
		t.Fatalf("GET of an address taken down: %v, want a refused dial", err)
	}
	if err := s.Up(a); err != nil {
		t.Fatal(err)
	}
	if err := get(t, s, a); err != nil {
		t.Fatal(err)
	}
}

// The resolver answers as set, counts its lookups, and hangs until its
// context ends when told to.
func TestTheResolverAnswersAsSet(t *testing.T) {
	var r Resolver
	r.Set(Addr(2))
	if got, err := r.LookupNetIP(context.Background(), "ip", "svc.test"); err != nil || len(got) != 1 || got[0] != Addr(2) {
		t.Fatalf("%v %v", got, err)
	}
	boom := errors.New("boom")
	r.Fail(boom)
	if _, err := r.LookupNetIP(context.Background(), "ip", "svc.test"); err != boom {
		t.Fatalf("err %v, want boom", err)
	}
	r.Hang()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := r.LookupNetIP(ctx, "ip", "svc.test"); done <- err }() // ends with its context
	if err := r.WaitLookups(context.Background(), 3); err != nil || r.Lookups() != 3 {
		t.Fatalf("lookups %d: %v", r.Lookups(), err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a hanging lookup ended with %v, want its context's error", err)
	}
}
