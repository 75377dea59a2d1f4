package toxi

import (
	"errors"
	"io"
	"net/http"
	"os"
	"syscall"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"go.uber.org/goleak"

	"github.com/connactor/connactor/internal/testkit/faultserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startToxiproxy starts the server, skipping (loudly) when it is not installed,
// unless CI=true, where a missing toxiproxy fails the test.
func startToxiproxy(t *testing.T) *Server {
	t.Helper()
	path, err := Find()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("toxiproxy is required under CI: %v", err)
		}
		t.Skipf("SKIPPED: %v; this test runs under CI", err)
	}
	s, err := Start(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestProxyForwardsAndToxicsApply(t *testing.T) {
	s := startToxiproxy(t)
	up, err := faultserver.Start(faultserver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	p, err := s.Proxy("up", up.Addr())
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	get := func(id string) (string, error) {
		req, _ := http.NewRequest("GET", "http://"+p.Listen+"/?id="+id, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get("1"); err != nil || body != faultserver.Body("1") {
		t.Fatalf("through the proxy: %q, %v", body, err)
	}
	if _, err := p.AddToxic("lat", "latency", "downstream", 1, toxiproxy.Attributes{"latency": 20}); err != nil {
		t.Fatal(err)
	}
	if body, err := get("2"); err != nil || body != faultserver.Body("2") {
		t.Fatalf("with latency: %q, %v", body, err)
	}
	if err := p.RemoveToxic("lat"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddToxic("rst", "reset_peer", "upstream", 1, toxiproxy.Attributes{"timeout": 0}); err != nil {
		t.Fatal(err)
	}
	if _, err := get("3"); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
		t.Fatalf("with reset_peer: %v, want a reset", err)
	}
	if err := p.Delete(); err != nil {
		t.Fatal(err)
	}
}

func TestFindRejectsABinaryOfAnotherVersion(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOXIPROXY_SERVER", self) // a Go binary, but not toxiproxy
	if _, err := Find(); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Find with a test binary: %v, want ErrNotInstalled", err)
	}
}
