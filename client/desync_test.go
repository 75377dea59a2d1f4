package client

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Response desync: a server that sends more than its response declares must
// never make a later request read those bytes as its own response. Each
// request names itself in its path and each genuine answer echoes it; the
// stray bytes are a complete response saying "WRONG".
func TestStrayBytesAfterAResponseNeverReachTheNextRequest(t *testing.T) {
	const stray = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nWRONG"
	for _, tc := range []struct {
		name   string
		answer func(path string) string
	}{
		{"beyond Content-Length", func(path string) string {
			return "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(path)) + "\r\n\r\n" + path + stray
		}},
		{"after 204", func(string) string { return "HTTP/1.1 204 No Content\r\n\r\n" + stray }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{MaxConnsPerRoute: 1, MaxConnsTotal: 1}, func(c *rawConn) {
				c.serve(func(_ int, req *http.Request) string { return tc.answer(req.URL.Path) })
			})
			for _, path := range []string{"/first", "/second", "/third"} {
				resp, body, err := h.do(h.newRequest("GET", path, nil))
				if err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
				if strings.Contains(body, "WRONG") || (resp.StatusCode == 200 && body != path) {
					t.Fatalf("GET %s answered %d %q: another response's bytes", path, resp.StatusCode, body)
				}
			}
			wantLog(t, h.srv.requestLog(), "c1 GET /first", "c2 GET /second", "c3 GET /third")
			h.settle()
		})
	}
}
