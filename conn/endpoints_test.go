package conn

import (
	"context"
	"errors"
	"net"
	"net/http/httptrace"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/connactor/connactor/internal/testkit/loopbacks"
)

// fakeNet is a DialContext whose addresses refuse, hang until their dial's
// context ends, or connect (a net.Pipe), as the test scripts them; it
// records the dials in order, with the time each started.
type fakeNet struct {
	mu     sync.Mutex
	hang   map[string]bool
	refuse map[string]bool
	dials  []string
	at     []time.Time
	peers  []net.Conn
}

var errFakeRefused = errors.New("connection refused (fake)")

func newFakeNet() *fakeNet { return &fakeNet{hang: map[string]bool{}, refuse: map[string]bool{}} }

func (f *fakeNet) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	f.mu.Lock()
	f.dials = append(f.dials, addr)
	f.at = append(f.at, time.Now())
	hang, refuse := f.hang[addr], f.refuse[addr]
	f.mu.Unlock()
	switch {
	case hang:
		<-ctx.Done()
		return nil, ctx.Err()
	case refuse:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errFakeRefused}
	}
	c, peer := net.Pipe()
	f.mu.Lock()
	f.peers = append(f.peers, peer)
	f.mu.Unlock()
	return c, nil
}

func (f *fakeNet) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.peers {
		p.Close()
	}
}

func (f *fakeNet) dialed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.dials...)
}

var (
	v6 = netip.MustParseAddrPort("[2001:db8::1]:443")
	v4 = netip.MustParseAddrPort("192.0.2.1:443")
)

// A dial to an endpoint alone goes there, and says so.
func TestADialToOneEndpointGoesThere(t *testing.T) {
	f := newFakeNet()
	defer f.close()
	var dl dialLog
	dl.to = Endpoints{Primary: v4}
	nc, err := dialTCP(context.Background(), "svc.test:443", &Options{DialContext: f.dial}, &dl)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if got := f.dialed(); len(got) != 1 || got[0] != v4.String() {
		t.Fatalf("dialed %v, want only %v", got, v4)
	}
	if dl.peer != v4 || dl.failed != (Endpoints{}) {
		t.Fatalf("peer %v failed %+v, want peer %v and no failure", dl.peer, dl.failed, v4)
	}
}

// A refused endpoint without a fallback fails the dial and is named failed.
func TestARefusedEndpointIsNamedFailed(t *testing.T) {
	f := newFakeNet()
	f.refuse[v4.String()] = true
	var dl dialLog
	dl.to = Endpoints{Primary: v4}
	if _, err := dialTCP(context.Background(), "svc.test:443", &Options{DialContext: f.dial}, &dl); !errors.Is(err, errFakeRefused) {
		t.Fatalf("err %v, want the refusal", err)
	}
	if dl.failed.Primary != v4 || dl.peer.IsValid() {
		t.Fatalf("failed %+v peer %v, want the primary failed and no peer", dl.failed, dl.peer)
	}
}

// Happy Eyeballs, as net.Dialer: a primary that fails makes the fallback start
// at once; one that hangs is raced by the fallback after FallbackDelay. The
// fallback connects; only a primary that failed on its own is named failed
// (one cancelled because the fallback won is not); and nothing of the race
// outlives the dial (the bubble ends only when every goroutine has).
func TestAPrimaryThatFailsOrHangsLosesToTheFallback(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(*fakeNet)
		after  time.Duration
		failed Endpoints
	}{
		{"refused", func(f *fakeNet) { f.refuse[v6.String()] = true }, 0, Endpoints{Primary: v6}},
		{"hanging", func(f *fakeNet) { f.hang[v6.String()] = true }, FallbackDelay, Endpoints{}},
	} {
		synctest.Test(t, func(t *testing.T) {
			f := newFakeNet()
			defer f.close()
			tc.script(f)
			start := time.Now()
			var dl dialLog
			dl.to = Endpoints{Primary: v6, Fallback: v4}
			nc, err := dialTCP(context.Background(), "svc.test:443", &Options{DialContext: f.dial}, &dl)
			if err != nil {
				t.Fatalf("%s primary: %v", tc.name, err)
			}
			nc.Close()
			if d := time.Since(start); d != tc.after {
				t.Fatalf("%s primary: the fallback connected after %v of the bubble's clock, want %v", tc.name, d, tc.after)
			}
			if dl.peer != v4 || dl.failed != tc.failed {
				t.Fatalf("%s primary: peer %v failed %+v, want %v reached and %+v failed", tc.name, dl.peer, dl.failed, v4, tc.failed)
			}
		})
	}
}

// When both families fail, the error is the primary's and both are named.
func TestBothFamiliesFailingReturnThePrimarysError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeNet()
		f.refuse[v6.String()] = true
		f.hang[v4.String()] = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var dl dialLog
		dl.to = Endpoints{Primary: v6, Fallback: v4}
		_, err := dialTCP(ctx, "svc.test:443", &Options{DialContext: f.dial}, &dl)
		if !errors.Is(err, errFakeRefused) {
			t.Fatalf("err %v, want the primary's refusal", err)
		}
		if dl.failed != (Endpoints{Primary: v6, Fallback: v4}) {
			t.Fatalf("failed %+v, want both (the fallback timed out)", dl.failed)
		}
	})
}

// A dial by name with a Resolver looks the host up through it (DNS hooks and
// all), then dials the first family's addresses in turn, as net.Dialer does.
func TestADialByNameResolvesThroughTheResolver(t *testing.T) {
	f := newFakeNet()
	defer f.close()
	a1, a2 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	f.refuse["192.0.2.1:80"] = true
	var hooks []string
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		DNSStart: func(i httptrace.DNSStartInfo) { hooks = append(hooks, "start "+i.Host) },
		DNSDone:  func(i httptrace.DNSDoneInfo) { hooks = append(hooks, "done") },
	})
	var res loopbacks.Resolver
	res.Set(a1, a2)
	var dl dialLog
	nc, err := dialTCP(ctx, "svc.test:80", &Options{DialContext: f.dial, Resolver: &res}, &dl)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if got := f.dialed(); len(got) != 2 || got[0] != "192.0.2.1:80" || got[1] != "192.0.2.2:80" {
		t.Fatalf("dialed %v, want both addresses in order", got)
	}
	if dl.peer != netip.AddrPortFrom(a2, 80) {
		t.Fatalf("peer %v, want the second address", dl.peer)
	}
	if len(hooks) != 2 || hooks[0] != "start svc.test" || hooks[1] != "done" {
		t.Fatalf("DNS hooks %v, want start and done", hooks)
	}
}

// A lookup that finds nothing fails the dial as net.Dialer does: a
// *net.OpError around a "no such host" *net.DNSError.
func TestALookupThatFindsNothingFailsAsNetDialerDoes(t *testing.T) {
	notFound := &loopbacks.Resolver{}
	notFound.Fail(&net.DNSError{Err: "no such host", Name: "svc.test", IsNotFound: true})
	for _, r := range []*loopbacks.Resolver{{}, notFound} { // no address; not found
		_, err := dialTCP(context.Background(), "svc.test:80", &Options{Resolver: r}, nil)
		var op *net.OpError
		var dnsErr *net.DNSError
		if !errors.As(err, &op) || op.Op != "dial" || !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
			t.Fatalf("err %#v, want a dial *net.OpError around a not-found *net.DNSError", err)
		}
	}
}
