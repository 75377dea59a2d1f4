package client

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"
)

func gzipped(s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.Bytes()
}

// As net/http: gzip is asked for and undone transparently, unless the caller
// chose an encoding, asked for a range, or turned it off.
func TestGzipIsTransparentAsWithNetHTTP(t *testing.T) {
	const text = "a compressible body, a compressible body, a compressible body"
	var asked []string
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Header.Get("Accept-Encoding"))
		if r.Header.Get("Accept-Encoding") == "gzip" {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gzipped(text))
			return
		}
		io.WriteString(w, text)
	})
	c := newClient(t, Config{MaxConnsPerRoute: 1})
	req := newGet(t, srv.URL)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != text || !resp.Uncompressed || resp.ContentLength != -1 ||
		resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("Content-Length") != "" {
		t.Fatalf("decompressed: %q uncompressed=%v cl=%d header=%v", body, resp.Uncompressed, resp.ContentLength, resp.Header)
	}
	if _, ok := req.Header["Accept-Encoding"]; ok {
		t.Fatal("the caller's request was modified")
	}
	// The caller's own Accept-Encoding: the body is left alone.
	own := newGet(t, srv.URL)
	own.Header.Set("Accept-Encoding", "gzip")
	resp, err = c.RoundTrip(own)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(raw, gzipped(text)) || resp.Uncompressed {
		t.Fatalf("caller-chosen encoding was decoded: %q", raw)
	}
	off := newClient(t, Config{DisableCompression: true})
	if got := get(t, off, srv.URL); got != text {
		t.Fatalf("DisableCompression: %q", got)
	}
	if want := []string{"gzip", "gzip", ""}; strings.Join(asked, ",") != strings.Join(want, ",") {
		t.Fatalf("Accept-Encoding sent: %q, want %q", asked, want)
	}
	if st := c.Stats(); st.Idle != 1 || st.Routes[0].Opened != 1 {
		t.Fatalf("the connection was not re-used after gzip bodies: %+v", st)
	}
}
