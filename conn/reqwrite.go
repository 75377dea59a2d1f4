package conn

import (
	"bufio"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// The request head writer: the request line and header fields of a request
// without a body, written straight into the connection's bufio.Writer, byte
// for byte as http.Request.Write (origin-form) or WriteProxy (absolute-form)
// writes them, with up to two fields set on top of the request's header
// (Accept-Encoding: gzip for transparent compression, Proxy-Authorization for
// an HTTP proxy) as Header.Set on a copy of the header would set them, without
// the copy. Request.Write formats the request line and the Host and User-Agent
// fields with fmt, builds a transferWriter, sorts the header through a pool and
// allocates the request URI: four to five allocations and ~1 us a request,
// which this writer does without (FuzzRequestWriter holds it to Request.Write
// over a fuzzed corpus).
//
// Anything outside the common case is left to Request.Write (headWriter
// reports false, having written nothing): a request with a body (net/http's
// transfer rules and body errors are its own), Transfer-Encoding, CONNECT, a
// nil URL, the httptrace hook WroteHeaderField, and every request that
// Request.Write refuses (a Host that is not valid for a proxy, control
// characters in the request target, an IDNA error).

// defaultUserAgent is net/http's, sent when the header has no User-Agent key.
const defaultUserAgent = "Go-http-client/1.1"

// headField is a field set on top of a request's header (Header.Set semantics).
type headField struct{ key, value string }

// headWriter writes request heads on one connection. keys is scratch space for
// sorting field names, kept between requests; one request is written at a time.
type headWriter struct {
	keys []string
	err  error // the first write error of the current head
}

// write writes req's head on bw as Request.Write (proxy false) or WriteProxy
// (proxy true) would, with extra set on top of req.Header; extra's keys must be
// canonical and distinct. It reports false, having written nothing, for a
// request it leaves to Request.Write. It fires WroteHeaders and WroteRequest,
// as Request.Write does (before the caller's final flush). req is not changed.
func (w *headWriter) write(bw *bufio.Writer, req *http.Request, proxy bool, extra []headField) (handled bool, err error) {
	u := req.URL
	if u == nil || (req.Body != nil && req.Body != http.NoBody) || (req.Body == nil && req.ContentLength != 0) ||
		len(req.TransferEncoding) > 0 || req.Method == http.MethodConnect {
		return false, nil
	}
	trace := httptrace.ContextClientTrace(req.Context())
	if trace != nil && trace.WroteHeaderField != nil {
		return false, nil
	}

	// The Host field: net/http's rules (punycode, an invalid host sent empty,
	// an IPv6 zone removed, RFC 6874).
	host := req.Host
	if host == "" {
		host = u.Host
	}
	host, err = httpguts.PunycodeHostPort(host)
	if err != nil {
		return false, nil
	}
	if !httpguts.ValidHostHeader(host) {
		if proxy {
			return false, nil
		}
		host = ""
	}
	host = removeZone(host)

	// The request target: RequestURI, or absolute-form for a proxy, in
	// pieces (no string is built).
	absolute := proxy && u.Scheme != "" && u.Opaque == ""
	var pre, path string // the target is pre + path + ["?" + RawQuery]
	switch {
	case u.Opaque != "":
		path = u.Opaque
		if len(path) >= 2 && path[0] == '/' && path[1] == '/' {
			pre = u.Scheme + ":" // rare: Request.Write allocates this too
		}
	default:
		if path = u.EscapedPath(); path == "" {
			path = "/"
		}
	}
	query := u.ForceQuery || u.RawQuery != ""
	if hasCTL(path) || hasCTL(pre) || (query && hasCTL(u.RawQuery)) || (absolute && (hasCTL(u.Scheme) || hasCTL(host))) {
		return false, nil
	}

	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	w.err = nil
	w.str(bw, method)
	w.str(bw, " ")
	if absolute {
		w.str(bw, u.Scheme)
		w.str(bw, "://")
		w.str(bw, host)
	}
	w.str(bw, pre)
	w.str(bw, path)
	if query {
		w.str(bw, "?")
		w.str(bw, u.RawQuery)
	}
	w.str(bw, " HTTP/1.1\r\nHost: ")
	w.str(bw, host)
	w.str(bw, "\r\n")

	h := req.Header
	ua := defaultUserAgent
	if _, ok := h["User-Agent"]; ok {
		ua = h.Get("User-Agent")
	}
	if ua != "" {
		w.field(bw, "User-Agent", ua)
	}
	if req.Close && !hasCloseToken(first(h["Connection"])) {
		w.str(bw, "Connection: close\r\n")
	}
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		// Request.Write sends the length of these methods even when it is 0.
		w.str(bw, "Content-Length: 0\r\n")
	}

	// The header, sorted by name as Header.writeSubset sorts it, with the
	// extra fields in their places and the fields Request.Write writes
	// itself left out.
	keys := w.keys[:0]
	for k := range h {
		if !excludedField(k) && !isExtra(k, extra) {
			keys = append(keys, k)
		}
	}
	for _, f := range extra {
		if !excludedField(f.key) {
			keys = append(keys, f.key)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) {
			continue // Request.Write drops fields it cannot write
		}
		if v, ok := extraValue(k, extra); ok {
			w.field(bw, k, v)
			continue
		}
		for _, v := range h[k] {
			w.field(bw, k, v)
		}
	}
	clear(keys) // no strings kept alive between requests
	w.keys = keys[:0]
	w.str(bw, "\r\n")
	err = w.err
	if err == nil && trace != nil && trace.WroteHeaders != nil {
		trace.WroteHeaders()
	}
	if req.Body != nil { // http.NoBody: closed, as Request.Write closes it
		if cerr := req.Body.Close(); err == nil {
			err = cerr
		}
	}
	if trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{Err: err})
	}
	return true, err
}

func (w *headWriter) str(bw *bufio.Writer, s string) {
	if w.err == nil && s != "" {
		_, w.err = bw.WriteString(s)
	}
}

// field writes "key: value\r\n" with value cleaned as net/http cleans header
// values: CR and LF turned into spaces, then leading and trailing spaces and
// tabs trimmed.
func (w *headWriter) field(bw *bufio.Writer, key, value string) {
	i, j := 0, len(value)
	for i < j && isLWS(value[i]) {
		i++
	}
	for j > i && isLWS(value[j-1]) {
		j--
	}
	value = value[i:j]
	w.str(bw, key)
	w.str(bw, ": ")
	for len(value) > 0 && w.err == nil {
		k := 0
		for k < len(value) && value[k] != '\r' && value[k] != '\n' {
			k++
		}
		w.str(bw, value[:k])
		if k < len(value) {
			w.str(bw, " ")
			k++
		}
		value = value[k:]
	}
	w.str(bw, "\r\n")
}

// isLWS reports the bytes net/http trims around a header value (after turning
// CR and LF into spaces): space, tab, CR, LF.
func isLWS(b byte) bool { return b == ' ' || b == '\t' || b == '\r' || b == '\n' }

// excludedField reports the header keys Request.Write never copies from the
// header (it writes them itself, or not at all). The keys are compared as
// they are, not canonicalized, as net/http does.
func excludedField(k string) bool {
	switch k {
	case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
		return true
	}
	return false
}

func isExtra(k string, extra []headField) bool {
	_, ok := extraValue(k, extra)
	return ok
}

func extraValue(k string, extra []headField) (string, bool) {
	for _, f := range extra {
		if f.key == k {
			return f.value, true
		}
	}
	return "", false
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// hasCloseToken reports whether a Connection value holds the token "close" in
// any letter case, delimited by the value's ends, spaces, tabs or commas (the
// test Request.Write makes before it adds "Connection: close").
func hasCloseToken(v string) bool {
	const tok = "close"
	for i := 0; i+len(tok) <= len(v); i++ {
		if i > 0 && !isTokenBoundary(v[i-1]) {
			continue
		}
		if end := i + len(tok); end < len(v) && !isTokenBoundary(v[end]) {
			continue
		}
		match := true
		for j := 0; j < len(tok); j++ {
			if lower(v[i+j]) != tok[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

func isTokenBoundary(b byte) bool { return b == ' ' || b == ',' || b == '\t' }

// hasCTL reports whether s holds an ASCII control character (or DEL), which
// Request.Write refuses in a request target.
func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// removeZone removes an IPv6 zone from a bracketed host ("[fe80::1%25en0]:80"
// is sent as "[fe80::1]:80"): RFC 6874 says a client must not send it.
func removeZone(host string) string {
	if len(host) == 0 || host[0] != '[' {
		return host
	}
	end := strings.LastIndexByte(host, ']')
	if end < 0 {
		return host
	}
	pct := strings.LastIndexByte(host[:end], '%')
	if pct < 0 {
		return host
	}
	return host[:pct] + host[end:]
}
