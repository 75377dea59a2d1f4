//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/testkit/faultserver"
)

// oneShotServer answers one request per connection, without Connection: close,
// and then closes the connection, the silent close that a probe must catch. Each
// request's X-Seq is counted, so a request that reaches it twice is seen.
type oneShotServer struct {
	ln     net.Listener
	wg     sync.WaitGroup
	closed chan struct{} // one value per connection, after its close

	mu   sync.Mutex
	seen map[string]int
	conn int
}

func newOneShotServer(t *testing.T, cfg *tls.Config) *oneShotServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	s := &oneShotServer{ln: ln, closed: make(chan struct{}, 128), seen: map[string]int{}}
	s.wg.Go(func() { // owned by s.wg, waited for in cleanup
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serveOne(nc) }) // owned by s.wg
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *oneShotServer) serveOne(nc net.Conn) {
	defer func() {
		nc.Close()
		s.closed <- struct{}{}
	}()
	req, err := http.ReadRequest(bufio.NewReader(nc))
	if err != nil {
		return
	}
	if _, err := io.Copy(io.Discard, req.Body); err != nil {
		return
	}
	s.mu.Lock()
	s.seen[req.Header.Get("X-Seq")]++
	s.conn++
	s.mu.Unlock()
	io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
}

// postOnce sends a POST whose body cannot be replayed (no GetBody).
func postOnce(c *Client, url string, seq int) error {
	req, err := http.NewRequest("POST", url, strings.NewReader(fmt.Sprintf("payload %d", seq)))
	if err != nil {
		return err
	}
	req.GetBody = nil
	req.Header.Set("X-Seq", fmt.Sprint(seq))
	resp, err := c.RoundTrip(req)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil && string(b) != "ok" {
		err = fmt.Errorf("body %q", b)
	}
	return err
}

// A silent close after every response: 50 non-replayable POSTs to a server that closes after
// each response without saying so, each sent once the server's FIN is in the
// client's socket (inside IdleWatchDelay, before any idle watch looks). The
// probe before writing finds each stale connection, nothing is written to it,
// and the POST goes out once on a new connection: 0 of 50 fail.
func TestServerThatClosesAfterEveryResponseLosesNoPOST(t *testing.T) {
	for _, secure := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[secure], func(t *testing.T) {
			var srvTLS *tls.Config
			cfg := Config{MaxConnsPerRoute: 1, MaxConnsTotal: 1, Logger: quietLogger()}
			url := "http://"
			if secure {
				ts := httptest.NewUnstartedServer(nil)
				ts.StartTLS()
				defer ts.Close()
				srvTLS = ts.TLS
				roots := x509.NewCertPool()
				roots.AddCert(ts.Certificate())
				cfg.TLSConfig = &tls.Config{RootCAs: roots, ServerName: "example.com"}
				url = "https://"
			}
			srv := newOneShotServer(t, srvTLS)
			var lc faultserver.LastConn
			cfg.DialContext = lc.Dial
			c := newClient(t, cfg)
			url += srv.ln.Addr().String() + "/upload"
			failed := 0
			for seq := range 50 {
				if err := postOnce(c, url, seq); err != nil {
					failed++
					t.Logf("POST %d: %v", seq, err)
					continue // the failed exchange closed its connection
				}
				<-srv.closed
				waitFIN(t, &lc)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			for seq := range 50 {
				if n := srv.seen[fmt.Sprint(seq)]; n != 1 {
					t.Errorf("POST %d reached the server %d times", seq, n)
				}
			}
			if failed != 0 {
				t.Errorf("%d of 50 POSTs failed; want 0", failed)
			}
		})
	}
}

// The same without waiting for the FIN: a POST may then be written before the
// server's close arrives and fail with ErrOutcomeUnknown (net/http has the
// same race), but none is ever sent twice.
func TestServerThatClosesAfterEveryResponseNeverGetsAPOSTTwice(t *testing.T) {
	srv := newOneShotServer(t, nil)
	c := newClient(t, Config{MaxConnsPerRoute: 1, MaxConnsTotal: 1, Logger: quietLogger()})
	url := "http://" + srv.ln.Addr().String() + "/upload"
	failed := 0
	for seq := range 50 {
		if err := postOnce(c, url, seq); err != nil {
			failed++
			if !errors.Is(err, ErrOutcomeUnknown) {
				t.Errorf("POST %d: %v; want a response or ErrOutcomeUnknown", seq, err)
			}
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for seq, n := range srv.seen {
		if n != 1 {
			t.Errorf("POST %s reached the server %d times", seq, n)
		}
	}
	t.Logf("%d of 50 POSTs failed (written before the server's close arrived)", failed)
}

// waitFIN waits until the client's last socket holds the server's FIN (or any
// byte), without reading it: the state the test is about.
func waitFIN(t *testing.T, lc *faultserver.LastConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := lc.WaitFIN(ctx); err != nil {
		t.Fatal(err)
	}
}

// A connection found dead before anything was written to it is a bad idle
// connection, not a replay: 200 GETs to a server that closes after every
// response without saying so, each sent once the server's FIN is in the
// client's socket, so that the probe before writing finds every re-used
// connection dead. Each is discarded and the GET leased again; none of them
// spends the retry budget (20% of the requests, at least 10 a second), and
// none fails, as with net/http on the same server.
func TestDeadIdleConnectionsDoNotSpendTheRetryBudget(t *testing.T) {
	const n = 200
	run := func(t *testing.T, rt http.RoundTripper, lc *faultserver.LastConn, srv *oneShotServer) (failed int) {
		url := "http://" + srv.ln.Addr().String() + "/"
		for seq := range n {
			req, err := http.NewRequest(http.MethodGet, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Seq", fmt.Sprint(seq))
			resp, err := rt.RoundTrip(req)
			if err != nil {
				failed++
				t.Logf("GET %d: %v", seq, err)
				continue
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(b) != "ok" {
				t.Fatalf("GET %d: body %q, %v", seq, b, err)
			}
			<-srv.closed
			waitFIN(t, lc)
		}
		return failed
	}

	var netLC faultserver.LastConn
	tr := &http.Transport{DialContext: netLC.Dial}
	defer tr.CloseIdleConnections()
	if failed := run(t, tr, &netLC, newOneShotServer(t, nil)); failed != 0 {
		t.Errorf("net/http: %d of %d GETs failed", failed, n)
	}

	var lc faultserver.LastConn
	c := newClient(t, Config{DialContext: lc.Dial, Logger: quietLogger()})
	if failed := run(t, c, &lc, newOneShotServer(t, nil)); failed != 0 {
		t.Errorf("connactor: %d of %d GETs failed; net/http fails none", failed, n)
	}
	st := c.Stats()
	if st.Retries != 0 || st.RetriesRefused != 0 {
		t.Errorf("the retry budget counted %d replays and refused %d; nothing was written to a dead connection, so nothing was replayed",
			st.Retries, st.RetriesRefused)
	}
	assertQuiet(t, c)
}
