package h2server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"

	fs "github.com/connactor/connactor/internal/testkit/faultserver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// net/http's HTTP/2 connections end their read loops asynchronously
		// after CloseIdleConnections.
		goleak.IgnoreTopFunction("net/http.(*http2ClientConn).readLoop"),
	)
}

// waitTimeout bounds every wait: reached only when something hangs.
const waitTimeout = 30 * time.Second

func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// client is net/http's HTTP/2 client, trusting s.
func client(t *testing.T, s *Server) *http.Transport {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.Cert.Pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func get(t *testing.T, tr *http.Transport, url string) (*http.Response, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

func TestServerAnswersEveryRequestWithItsOwnNameOverHTTP2(t *testing.T) {
	s := start(t, Config{})
	tr := client(t, s)
	for _, id := range []string{"a", "b", "c"} {
		resp, body, err := get(t, tr, s.URL()+"/x?id="+id)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ProtoMajor != 2 || resp.StatusCode != 200 || body != fs.Body(id) {
			t.Fatalf("%s: got %s %d %q", id, resp.Proto, resp.StatusCode, body)
		}
	}
	if c := s.Counts(); c.Accepted != 1 {
		t.Errorf("%d connections accepted for three sequential requests; want 1", c.Accepted)
	}
	seen := s.Seen()
	if len(seen) != 3 || seen[2].ID != "c" || seen[2].Stream != 5 || seen[2].Conn != 0 {
		t.Errorf("seen: %+v", seen)
	}
}

// A script that lowers MAX_CONCURRENT_STREAMS learns when the client applied
// it; Sync learns when the client read everything written before.
func TestScriptWaitsForTheClientsAcknowledgements(t *testing.T) {
	lowered := make(chan bool, 1)
	synced := make(chan bool, 1)
	s := start(t, Config{Conn: func(int) Script {
		return Script{Run: func(c *Conn) {
			r, ok := c.Next()
			if !ok {
				return
			}
			lowered <- c.Settings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1})
			synced <- c.Sync()
			c.OK(r)
			Serve(c, func(c *Conn, r *Request) { c.OK(r) })
		}}
	}})
	tr := client(t, s)
	if _, body, err := get(t, tr, s.URL()+"/?id=a"); err != nil || body != "req=a" {
		t.Fatalf("got %q, %v", body, err)
	}
	if !<-lowered || !<-synced {
		t.Fatal("the client's acknowledgements never came")
	}
}

// A script can refuse a stream, and the client's reset of a stream is seen.
func TestScriptResetsAStreamAndSeesTheClientsResets(t *testing.T) {
	resets := make(chan http2.ErrCode, 1)
	s := start(t, Config{Conn: func(int) Script {
		return Script{Run: func(c *Conn) {
			r, ok := c.Next()
			if !ok {
				return
			}
			c.Headers(r.Stream, 200, false) // a body that never comes
			c.await(func() bool { _, ok := c.resets[r.Stream]; return ok })
			code, _ := c.ResetBy(r.Stream)
			resets <- code
		}}
	}})
	tr := client(t, s)
	resp, err := tr.RoundTrip(mustRequest(t, s.URL()+"/?id=a"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // before its end: the client resets the stream
	if code := <-resets; code != http2.ErrCodeCancel {
		t.Errorf("the client reset the stream with %v; want CANCEL", code)
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// A Raw script speaks anything after the handshake; the client that picked
// h2 by ALPN fails, and the server counts and closes the connection.
func TestRawScriptTakesTheConnectionAfterTheHandshake(t *testing.T) {
	var wg sync.WaitGroup
	wg.Add(1)
	s := start(t, Config{Conn: func(int) Script {
		return Script{Raw: func(c *fs.Conn) {
			defer wg.Done()
			c.Write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nreq=a")
			c.Close()
		}}
	}})
	tr := client(t, s)
	if _, _, err := get(t, tr, s.URL()+"/?id=a"); err == nil {
		t.Fatal("a server speaking HTTP/1.1 after ALPN h2 gave a response")
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := s.Wait(ctx, func(c fs.Counts) bool { return c.Closed == 1 }); err != nil {
		t.Fatal(err)
	}
}

// A CONTINUATION flood stops at the limit, or when the client gives up.
func TestContinuationFloodEndsWhenTheClientCloses(t *testing.T) {
	sent := make(chan int, 1)
	s := start(t, Config{Conn: func(int) Script {
		return Script{Run: func(c *Conn) {
			if r, ok := c.Next(); ok {
				sent <- c.ContinuationFlood(r.Stream, 64<<20)
			}
		}}
	}})
	tr := client(t, s)
	tr.MaxResponseHeaderBytes = 64 << 10
	_, _, err := get(t, tr, s.URL()+"/?id=a")
	if err == nil {
		t.Fatal("a response head that never ends gave a response")
	}
	if n := <-sent; n >= 64<<20 {
		t.Errorf("the flood sent %d bytes: the client never closed", n)
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("the flood ended in a timeout: %v", err)
	}
}
