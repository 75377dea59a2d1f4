package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestWorksAsHTTPClientTransportWithRedirectsAndCookies(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "s3cret", Path: "/"})
		http.Redirect(w, r, "/home", http.StatusFound)
	})
	mux.HandleFunc("/home", func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie("session")
		if err != nil {
			http.Error(w, "no cookie", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "welcome "+ck.Value)
	})
	srv := newServer(t, nil, mux)
	c := newClient(t, Config{})
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Transport: c, Jar: jar, Timeout: 5 * time.Second}
	resp, err := hc.Get(srv.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "welcome s3cret" || resp.Request.URL.Path != "/home" {
		t.Fatalf("got %d %q at %s", resp.StatusCode, b, resp.Request.URL)
	}
	st := c.Stats()
	if st.Routes[0].Opened != 1 || st.Routes[0].Leases != 2 {
		t.Fatalf("redirect did not re-use the connection: %+v", st.Routes[0])
	}
	assertQuiet(t, c)
}

func TestOneMebibyteBodyStreamsAndTheConnectionIsReused(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	sum := sha256.Sum256(big)
	tr := newTracker(1, nil)
	srv := newServer(t, tr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			h := sha256.New()
			n, _ := io.Copy(h, r.Body)
			if n != int64(len(big)) || !bytes.Equal(h.Sum(nil), sum[:]) {
				http.Error(w, "bad upload", 400)
				return
			}
		}
		w.Write(big)
	}))
	c := newClient(t, Config{MaxConnsPerRoute: 1})
	for i := 0; i < 3; i++ {
		method, body := http.MethodGet, io.Reader(nil)
		if i == 1 {
			method, body = http.MethodPost, bytes.NewReader(big)
		}
		req, _ := http.NewRequest(method, srv.URL, body)
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		n, err := io.Copy(h, resp.Body)
		resp.Body.Close()
		if err != nil || n != int64(len(big)) || !bytes.Equal(h.Sum(nil), sum[:]) || resp.StatusCode != 200 {
			t.Fatalf("%s: status %d, %d bytes, err %v", method, resp.StatusCode, n, err)
		}
	}
	if _, opened, _ := tr.snapshot(); opened != 1 {
		t.Fatalf("%d connections for 3 requests, want 1", opened)
	}
	assertQuiet(t, c)
}

func TestErrorStatusesAreResponsesNotErrors(t *testing.T) {
	srv := newServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/404":
			http.NotFound(w, r)
		default:
			http.Error(w, "boom", http.StatusInternalServerError)
		}
	}))
	c := newClient(t, Config{})
	for path, want := range map[string]int{"/404": 404, "/500": 500} {
		resp, err := c.RoundTrip(requestCtx(context.Background(), srv.URL+path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
	}
	assertQuiet(t, c)
}

func TestBadInputGetsClearErrorsNeverPanics(t *testing.T) {
	srv := newServer(t, nil, hello)
	// A port nobody listens on: listen, note the address, close.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String()
	l.Close()
	c := newClient(t, Config{DialTimeout: 2 * time.Second})
	bad := func(name string, req *http.Request, want error) {
		t.Helper()
		resp, err := c.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: no error", name)
		}
		if want != nil && !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", name, err, want)
		}
		t.Logf("%s: %v", name, err)
	}
	mk := func(method, raw string) *http.Request {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return (&http.Request{Method: method, URL: u, Header: http.Header{}}).WithContext(context.Background())
	}
	bad("nil request", nil, ErrInvalidRequest)
	bad("nil URL", &http.Request{Method: "GET", Header: http.Header{}}, ErrInvalidRequest)
	bad("unsupported scheme", mk("GET", "ftp://example.com/x"), ErrUnsupportedScheme)
	bad("missing host", mk("GET", "http:///path"), nil)
	bad("bad method", mk("GE T", srv.URL), ErrInvalidRequest)
	inj := mk("GET", srv.URL)
	inj.Header.Set("X-Evil", "a\r\nInjected: yes")
	bad("header injection", inj, ErrInvalidRequest)
	refused := mk("GET", dead)
	bad("refused connection", refused, nil)
	var oe *net.OpError
	if _, err := c.RoundTrip(mk("GET", dead)); !errors.As(err, &oe) {
		t.Fatalf("refused connection error does not unwrap to *net.OpError: %v", err)
	}
	if got := get(t, c, srv.URL); got != "hello" {
		t.Fatalf("pool unusable after bad input: %q", got)
	}
	assertQuiet(t, c)
	for _, r := range c.Stats().Routes {
		if strings.Contains(r.Route, l.Addr().String()) && r.Open != 0 {
			t.Fatalf("failed dials left connections open: %+v", r)
		}
	}
}
