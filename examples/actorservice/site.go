package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"
)

// site is the local site the link checker checks: a documentation server
// whose pages link to each other and to an API server, a missing page, a
// teapot and a port where nothing listens.
type site struct {
	docs, api *httptest.Server
	dead      string // http://127.0.0.1:port with nothing listening
}

func startSite() (*site, error) {
	s := &site{}
	// A port that was free a moment ago: dials to it are refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.dead = "http://" + ln.Addr().String()
	ln.Close()

	s.api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/status":
			io.WriteString(w, "ok\n")
		case "/v1/things":
			time.Sleep(20 * time.Millisecond) // a slower endpoint
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"things":[]}`)
		case "/teapot":
			http.Error(w, "I'm a teapot", http.StatusTeapot)
		default:
			http.NotFound(w, r)
		}
	}))
	pages := map[string]string{
		"/": `<h1>Docs</h1><ul>
			<li><a href="/guide">Guide</a> (<a href="/guide#install">install</a>)
			<li><a href="reference">API reference</a>
			<li><a href="/missing">A page that is gone</a>
			<li><a href="` + s.api.URL + `/status">API status</a>
			<li><a href="` + s.api.URL + `/teapot">Tea</a>
			<li><a href="` + s.dead + `/">The old wiki</a>
			<li><a href="mailto:docs@example.test">Write to us</a>
		</ul>`,
		"/guide": `<h1>Guide</h1><p><a href="/">Home</a> · <a href="/faq">FAQ</a> · <a href="/old-faq">Old FAQ</a></p>`,
		"/faq":   `<h1>FAQ</h1><p><a href="/">Home</a></p>`,
		"/reference": `<h1>API reference</h1><p><a href="` + s.api.URL + `/v1/things">GET /v1/things</a>
			<a href="` + s.api.URL + `/v1/gone">GET /v1/gone</a></p>`,
	}
	s.docs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old-faq" {
			http.Redirect(w, r, "/faq", http.StatusMovedPermanently)
			return
		}
		page, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><html><body>%s</body></html>", page)
	}))
	return s, nil
}

// name shortens a URL of the site for the report: "docs/guide",
// "api/status", "dead/".
func (s *site) name(u string) string {
	for _, p := range []struct{ prefix, name string }{{s.docs.URL, "docs"}, {s.api.URL, "api"}, {s.dead, "dead"}} {
		if rest, ok := strings.CutPrefix(u, p.prefix); ok {
			return p.name + rest
		}
	}
	return u
}

func (s *site) close() {
	s.docs.Close()
	s.api.Close()
}
