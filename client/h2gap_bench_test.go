//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package client

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// BenchmarkH2Gap measures one sequential GET (13-byte body, read to EOF and
// closed) over TLS HTTP/2 (chosen by ALPN), through connactor and through
// net/http's Transport (ForceAttemptHTTP2), against the same Go HTTP/2
// server in the same run, so that the difference between the two is the
// client's. Besides allocs/op it reports the process's CPU time and context
// switches per request (getrusage). Compression is off on both, as in
// cmd/connbench: the same request bytes.
//
// The server runs in this process (inproc: its CPU is counted too, the same
// for both clients) and in a process of its own (proc: this test binary run
// again, as cmd/connbench runs its server; the figures are the client's
// alone, and its goroutines wake from the network as they do in production):
//
//	go test -run '^$' -bench H2Gap -benchmem -count 5 -cpu 1,2 ./client
func BenchmarkH2Gap(b *testing.B) {
	b.Run("inproc", func(b *testing.B) {
		ts := startH2GapServer()
		b.Cleanup(ts.Close)
		roots := x509.NewCertPool()
		roots.AddCert(ts.Certificate())
		benchH2Gap(b, ts.URL, roots)
	})
	b.Run("proc", func(b *testing.B) {
		url, roots := startH2GapProcess(b)
		benchH2Gap(b, url, roots)
	})
}

func benchH2Gap(b *testing.B, base string, roots *x509.CertPool) {
	url := base + "/13"
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

// startH2GapServer starts the benchmark's server: Go's HTTP/2 over TLS,
// answering every request with 13 bytes.
func startH2GapServer() *httptest.Server {
	body := []byte("Hello, World!")
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	}))
	ts.EnableHTTP2 = true
	ts.StartTLS()
	return ts
}

// h2GapServerEnv, set to 1, makes this test binary the server process of
// BenchmarkH2Gap/proc (see init) instead of running tests.
const h2GapServerEnv = "CONNACTOR_H2GAP_SERVER"

// init serves as BenchmarkH2Gap's server process when asked to (h2GapServerEnv),
// before TestMain: it prints its URL and its certificate (base64 DER) on one
// line, serves until its standard input ends, and exits.
func init() {
	if os.Getenv(h2GapServerEnv) != "1" {
		return
	}
	ts := startH2GapServer()
	fmt.Printf("%s %s\n", ts.URL, base64.StdEncoding.EncodeToString(ts.Certificate().Raw))
	io.Copy(io.Discard, os.Stdin)
	ts.Close()
	os.Exit(0)
}

// startH2GapProcess runs this test binary again as the server (init), and
// returns its URL and a pool that trusts its certificate. The process ends
// when the benchmark does (its standard input closed).
func startH2GapProcess(b *testing.B) (string, *x509.CertPool) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), h2GapServerEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("the server process said nothing: %v", err)
	}
	url, certB64, ok := strings.Cut(strings.TrimSpace(line), " ")
	der, err := base64.StdEncoding.DecodeString(certB64)
	if !ok || err != nil {
		b.Fatalf("the server process said %q, want its URL and certificate", line)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return url, roots
}
