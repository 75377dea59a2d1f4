package h2

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"testing"

	"golang.org/x/net/http2"
)

// BenchmarkRoundTrip measures one GET on one shared TLS HTTP/2 connection to
// Go's server in the same process, from parallel callers (b.SetParallelism),
// through the Conn, through the bare x/net ClientConn it wraps (the engine's
// cost alone), and through net/http's Transport (the reference). Run it on a
// quiet machine: go test -run '^$' -bench RoundTrip -benchmem ./conn/h2/
func BenchmarkRoundTrip(b *testing.B) {
	ts, _ := startH2(b, nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok"))
	}))
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	tlsConfig := &tls.Config{RootCAs: roots, NextProtos: []string{"h2"}}
	dial := func(b *testing.B) *tls.Conn {
		tc, err := tls.Dial("tcp", ts.Listener.Addr().String(), tlsConfig)
		if err != nil {
			b.Fatal(err)
		}
		return tc
	}
	run := func(b *testing.B, rt func(*http.Request) (*http.Response, error)) {
		b.ReportAllocs()
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
			for pb.Next() {
				resp, err := rt(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}

	b.Run("conn-h2", func(b *testing.B) {
		c, err := New(dial(b), Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		run(b, func(req *http.Request) (*http.Response, error) { return c.RoundTrip(req, nil) })
	})
	b.Run("x-net-clientconn", func(b *testing.B) {
		t2 := &http2.Transport{DisableCompression: true}
		cc, err := t2.NewClientConn(dial(b))
		if err != nil {
			b.Fatal(err)
		}
		defer cc.Close()
		run(b, cc.RoundTrip)
	})
	b.Run("net-http-transport", func(b *testing.B) {
		tr := &http.Transport{TLSClientConfig: tlsConfig.Clone(), ForceAttemptHTTP2: true, DisableCompression: true}
		defer tr.CloseIdleConnections()
		run(b, tr.RoundTrip)
	})
}

// BenchmarkNew measures starting a Conn on a dialled TLS connection (the
// per-connection engine and Transport), the handshake excluded.
func BenchmarkNew(b *testing.B) {
	ts, _ := startH2(b, nil, http.NotFoundHandler())
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	b.ReportAllocs()
	for range b.N {
		b.StopTimer()
		tc, err := tls.Dial("tcp", ts.Listener.Addr().String(), &tls.Config{RootCAs: roots, NextProtos: []string{"h2"}})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c, err := New(tc, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		c.Close()
		b.StartTimer()
	}
}
