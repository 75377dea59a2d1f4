package conn

import (
	"bufio"
	"bytes"
	"context"
	"maps"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// The head writer (reqwrite.go) against net/http's Request.Write and
// WriteProxy, byte for byte.

// Request flags of writerCase.
const (
	wcProxy     = 1 << iota // absolute-form (WriteProxy)
	wcGzip                  // Accept-Encoding: gzip on top of the header
	wcProxyAuth             // Proxy-Authorization on top of the header
	wcClose                 // req.Close
	wcNoBody                // Body: http.NoBody (else nil)
	wcLength                // ContentLength 5 (with a nil Body: Request.Write's error)
	wcTrace                 // a trace with WroteHeaders and WroteRequest
	wcFieldHook             // ... and WroteHeaderField (left to Request.Write)
)

// writerCase builds a request from fuzzed parts. headers is a list of
// "key\x00value" pairs separated by "\x01"; rawURL is parsed by url.Parse
// (requests whose URL does not parse are skipped), and host, when not empty,
// is Request.Host.
type writerCase struct {
	method, rawURL, host, headers string
	flags                         uint8
}

func (wc writerCase) request(t *testing.T, hooks *traceCounts) (*http.Request, bool) {
	u, err := url.Parse(wc.rawURL)
	if err != nil {
		return nil, false
	}
	req := &http.Request{Method: wc.method, URL: u, Host: wc.host, Header: http.Header{}, Close: wc.flags&wcClose != 0}
	if wc.headers != "" {
		for _, kv := range strings.Split(wc.headers, "\x01") {
			k, v, _ := strings.Cut(kv, "\x00")
			req.Header[k] = append(req.Header[k], v)
		}
	}
	if wc.flags&wcNoBody != 0 {
		req.Body = http.NoBody
	}
	if wc.flags&wcLength != 0 {
		req.ContentLength = 5
	}
	if wc.flags&wcTrace != 0 {
		ct := &httptrace.ClientTrace{
			WroteHeaders: func() { hooks.headers++ },
			WroteRequest: func(i httptrace.WroteRequestInfo) {
				hooks.requests++
				if i.Err != nil {
					hooks.errs++
				}
			},
		}
		if wc.flags&wcFieldHook != 0 {
			ct.WroteHeaderField = func(string, []string) { hooks.fields++ }
		}
		req = req.WithContext(httptrace.WithClientTrace(context.Background(), ct))
	}
	return req, true
}

func (wc writerCase) extra() []headField {
	var extra []headField
	if wc.flags&wcGzip != 0 {
		extra = append(extra, headField{"Accept-Encoding", "gzip"})
	}
	if wc.flags&wcProxyAuth != 0 {
		extra = append(extra, headField{"Proxy-Authorization", "Basic dTpw"})
	}
	return extra
}

type traceCounts struct{ headers, requests, errs, fields int }

// reference writes the request with net/http, the extra fields set on a copy
// of its header (what conn did before it had a writer of its own).
func (wc writerCase) reference(t *testing.T) (out []byte, err error, hooks traceCounts, ok bool) {
	req, ok := wc.request(t, &hooks)
	if !ok {
		return nil, nil, hooks, false
	}
	if extra := wc.extra(); len(extra) > 0 {
		r := *req
		r.Header = req.Header.Clone()
		for _, f := range extra {
			r.Header.Set(f.key, f.value)
		}
		req = &r
	}
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	if wc.flags&wcProxy != 0 {
		err = req.WriteProxy(bw)
	} else {
		err = req.Write(bw)
	}
	bw.Flush()
	return buf.Bytes(), err, hooks, true
}

// ours writes the request with the head writer; handled is false when it left
// the request to net/http.
func (wc writerCase) ours(t *testing.T, hw *headWriter) (out []byte, err error, hooks traceCounts, handled bool) {
	req, ok := wc.request(t, &hooks)
	if !ok {
		return nil, nil, hooks, false
	}
	before := maps.Clone(req.Header)
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	handled, err = hw.write(bw, req, wc.flags&wcProxy != 0, wc.extra())
	if !handled && bw.Buffered() > 0 {
		t.Fatalf("the writer left the request to net/http after writing %q", buf.String())
	}
	bw.Flush()
	if !maps.EqualFunc(before, req.Header, slices.Equal) {
		t.Fatalf("the writer changed the request's header: %q, was %q", req.Header, before)
	}
	return buf.Bytes(), err, hooks, handled
}

// check compares the two writers on wc; it reports whether the head writer
// handled the request.
func (wc writerCase) check(t *testing.T, hw *headWriter) bool {
	t.Helper()
	want, wantErr, wantHooks, ok := wc.reference(t)
	if !ok {
		return false
	}
	got, gotErr, gotHooks, handled := wc.ours(t, hw)
	if !handled {
		return false
	}
	if wantErr != nil || gotErr != nil {
		t.Fatalf("%+v: errors differ: net/http %v, ours %v", wc, wantErr, gotErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%+v: heads differ:\nnet/http %q\nours     %q", wc, want, got)
	}
	if gotHooks != wantHooks {
		t.Fatalf("%+v: trace hooks differ: net/http %+v, ours %+v", wc, wantHooks, gotHooks)
	}
	return true
}

var writerSeeds = []writerCase{
	{"GET", "http://example.com/", "", "", 0},
	{"GET", "http://127.0.0.1:8080/13", "", "", wcGzip},
	{"", "http://example.com/a/b?x=1&y=2", "", "Accept\x00*/*\x01X-Trace\x00abc", wcGzip},
	{"POST", "http://example.com/form", "", "Content-Type\x00text/plain", wcNoBody},
	{"PUT", "http://example.com/", "", "", 0},
	{"PATCH", "http://example.com/", "", "", wcNoBody | wcClose},
	{"DELETE", "http://example.com/x", "", "Connection\x00keep-alive", wcClose},
	{"GET", "http://example.com/", "", "Connection\x00Keep-Alive, CLOSE", wcClose},
	{"GET", "http://example.com/", "", "Connection\x00closed", wcClose},
	{"GET", "http://example.com/", "other.example:81", "User-Agent\x00  my agent\r\n v1 \t", 0},
	{"GET", "http://example.com/", "", "User-Agent\x00", 0},
	{"GET", "http://example.com/", "", "user-agent\x00lower\x01host\x00h\x01Content-Length\x009\x01Trailer\x00T", 0},
	{"GET", "http://example.com/", "", "X-Multi\x00a\x01X-Multi\x00b\x01Bad Name\x00x\x01X-CRLF\x00a\r\nInjected: 1", 0},
	{"GET", "http://example.com/", "", "Accept-Encoding\x00br", wcGzip},
	{"GET", "http://example.com/p", "", "Proxy-Authorization\x00Basic old", wcProxy | wcProxyAuth | wcGzip},
	{"GET", "https://example.com/p?q", "", "", wcProxy},
	{"GET", "http://[fe80::1%25en0]:8080/", "", "", 0},
	{"GET", "http://[fe80::1%25en0]:8080/", "", "", wcProxy},
	{"GET", "http://bücher.example/", "", "", 0},
	{"GET", "http://exa mple.com/", "", "", 0},
	{"GET", "http://example.com/", "bad host\r\n", "", 0},
	{"GET", "http://example.com/", "bad host", "", wcProxy},
	{"GET", "mailto:someone@example.com", "", "", 0},
	{"GET", "http:////example.com//a", "", "", 0},
	{"GET", "http://example.com/a%2Fb/c d?", "", "", 0},
	{"GET", "http://example.com/?", "", "", 0},
	{"get", "http://example.com/", "", "", wcNoBody},
	{"OPTIONS", "*", "example.com", "", 0},
	{"CONNECT", "http://example.com:443", "", "", 0},
	{"GET", "http://example.com/", "", "", wcLength},
	{"POST", "http://example.com/", "", "", wcNoBody | wcLength},
	{"GET", "http://example.com/", "", "", wcTrace},
	{"GET", "http://example.com/", "", "X\x00y", wcTrace | wcFieldHook},
	{"GET", "/relative", "", "", 0},
	{"GET", "http://example.com/\x7f", "", "", 0},
}

// The head writer handles the common requests itself and writes them exactly
// as Request.Write and WriteProxy do.
func TestHeadWriterWritesCommonRequestsAsNetHTTPDoes(t *testing.T) {
	var hw headWriter
	for _, wc := range []writerCase{
		{"GET", "http://127.0.0.1:8080/13", "", "", wcGzip},
		{"", "http://example.com/a/b?x=1&y=2", "", "Accept\x00*/*\x01X-Trace\x00abc\x01Authorization\x00Bearer t", 0},
		{"POST", "http://example.com/", "", "", wcNoBody},
		{"HEAD", "http://example.com/", "h.example", "User-Agent\x00agent/1", wcClose},
		{"GET", "http://example.com/p?q=1", "", "Accept-Encoding\x00identity", wcProxy | wcProxyAuth | wcGzip},
		{"GET", "http://example.com/", "", "", wcTrace},
	} {
		if !wc.check(t, &hw) {
			t.Errorf("%+v: left to net/http; want it written by the head writer", wc)
		}
	}
}

// Requests the head writer leaves to net/http: it writes nothing for them.
func TestHeadWriterLeavesTheRestToNetHTTP(t *testing.T) {
	var hw headWriter
	for _, wc := range []writerCase{
		{"CONNECT", "http://example.com:443", "", "", 0},
		{"GET", "http://example.com/", "", "", wcLength},
		{"GET", "http://example.com/", "", "", wcTrace | wcFieldHook},
		{"GET", "http://example.com/", "bad host", "", wcProxy},
		{"GET", "http://example.com/%7f\x7f", "", "", 0},
	} {
		if _, _, _, handled := wc.ours(t, &hw); handled {
			t.Errorf("%+v: handled; want it left to net/http", wc)
		}
	}
	req, _ := http.NewRequest("POST", "http://example.com/", strings.NewReader("body"))
	var buf bytes.Buffer
	if handled, _ := hw.write(bufio.NewWriter(&buf), req, false, nil); handled {
		t.Error("a request with a body was handled; want it left to net/http")
	}
}

// FuzzRequestWriter holds the head writer to net/http's Request.Write and
// WriteProxy: for every request it handles, the same bytes, no error where
// net/http has none, the same trace hooks, and the request left unchanged.
func FuzzRequestWriter(f *testing.F) {
	for _, wc := range writerSeeds {
		f.Add(wc.method, wc.rawURL, wc.host, wc.headers, wc.flags)
	}
	var hw headWriter // re-used, as a connection re-uses its writer
	f.Fuzz(func(t *testing.T, method, rawURL, host, headers string, flags uint8) {
		writerCase{method, rawURL, host, headers, flags}.check(t, &hw)
	})
}

// The head writer allocates nothing for a GET with a few header fields.
func TestHeadWriterDoesNotAllocate(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://127.0.0.1:8080/13?x=1", nil)
	req.Header.Set("Accept", "*/*")
	req.Header.Set("X-Request-Id", "42")
	var hw headWriter
	bw := bufio.NewWriterSize(discard{}, 4096)
	extra := []headField{{"Accept-Encoding", "gzip"}}
	if n := testing.AllocsPerRun(100, func() {
		if handled, err := hw.write(bw, req, false, extra); !handled || err != nil {
			t.Fatal(handled, err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per request head", n)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
