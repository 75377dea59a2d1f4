//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package client

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
)

// BenchmarkH2Gap measures one sequential GET (13-byte body, read to EOF and
// closed) over TLS HTTP/2 (chosen by ALPN), through connactor and through
// net/http's Transport (ForceAttemptHTTP2), against the same in-process Go
// HTTP/2 server in the same run, so that the difference between the two is
// the client's. Besides allocs/op it reports the process's CPU time and
// context switches per request (getrusage; the server's share included, the
// same for both). Compression is off on both, as in cmd/connbench: the same
// request bytes.
//
//	go test -run '^$' -bench H2Gap -benchmem -count 5 -cpu 1,2 ./client
func BenchmarkH2Gap(b *testing.B) {
	body := []byte("Hello, World!")
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	b.Cleanup(ts.Close)
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	url := ts.URL + "/13"

	b.Run("connactor", func(b *testing.B) {
		c := newClient(b, Config{TLSConfig: &tls.Config{RootCAs: roots}, DisableCompression: true,
			Logger: testLogger()})
		runH2Gap(b, c, url)
	})
	b.Run("nethttp", func(b *testing.B) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true,
			DisableCompression: true}
		b.Cleanup(tr.CloseIdleConnections)
		runH2Gap(b, tr, url)
	})
}

func runH2Gap(b *testing.B, rt http.RoundTripper, url string) {
	req, buf := newBenchRequest(b, url), make([]byte, 512)
	resp, err := rt.RoundTrip(req) // the connection, dialled outside the measure
	if err != nil {
		b.Fatal(err)
	}
	if resp.ProtoMajor != 2 {
		b.Fatalf("got %s, want HTTP/2", resp.Proto)
	}
	resp.Body.Close()
	b.ReportAllocs()
	cpu0, sw0 := rusage(b)
	for b.Loop() {
		if err := benchGet(rt, req, buf); err != nil {
			b.Fatal(err)
		}
	}
	cpu1, sw1 := rusage(b)
	b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(sw1-sw0)/float64(b.N), "ctxsw/op")
}

// rusage returns the process's CPU time (user and system, in ns) and context
// switches (voluntary and involuntary) so far.
func rusage(b *testing.B) (cpu, ctxsw int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), ru.Nvcsw + ru.Nivcsw
}
