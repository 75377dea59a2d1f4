package conn

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"
)

func readResponse(t *testing.T, method, raw string) (*http.Request, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(method, "http://example.test/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), req)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return req, resp
}

func TestReusableFollowsRFC9112(t *testing.T) {
	for _, tc := range []struct {
		name, method, raw string
		reqClose          bool
		reqConnection     string
		ok                bool
		idle              time.Duration
	}{
		{name: "HTTP/1.1 with length", method: "GET", raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", ok: true},
		{name: "chunked", method: "GET", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", ok: true},
		{name: "server Connection: close", method: "GET", raw: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"},
		{name: "close among other tokens", method: "GET", raw: "HTTP/1.1 200 OK\r\nConnection: upgrade, Close\r\nContent-Length: 0\r\n\r\n"},
		{name: "request Close", method: "GET", raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", reqClose: true},
		{name: "request Connection header", method: "GET", raw: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", reqConnection: "close"},
		{name: "HTTP/1.0 without keep-alive", method: "GET", raw: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"},
		{name: "HTTP/1.0 with keep-alive", method: "GET", raw: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", ok: true},
		{name: "body delimited by close", method: "GET", raw: "HTTP/1.1 200 OK\r\n\r\nuntil EOF"},
		{name: "HEAD without length", method: "HEAD", raw: "HTTP/1.1 200 OK\r\n\r\n", ok: true},
		{name: "204", method: "GET", raw: "HTTP/1.1 204 No Content\r\n\r\n", ok: true},
		{name: "304", method: "GET", raw: "HTTP/1.1 304 Not Modified\r\n\r\n", ok: true},
		{name: "101", method: "GET", raw: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"},
		{name: "CONNECT tunnel", method: "CONNECT", raw: "HTTP/1.1 200 Connection established\r\n\r\n"},
		{name: "CONNECT refused", method: "CONNECT", raw: "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n", ok: true},
		{name: "Keep-Alive timeout", method: "GET", raw: "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=100\r\nContent-Length: 0\r\n\r\n", ok: true, idle: 4500 * time.Millisecond},
		{name: "Keep-Alive timeout=1", method: "GET", raw: "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=1\r\nContent-Length: 0\r\n\r\n", ok: true, idle: 900 * time.Millisecond},
		{name: "Keep-Alive timeout=0", method: "GET", raw: "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=0\r\nContent-Length: 0\r\n\r\n"},
		{name: "Keep-Alive max=0", method: "GET", raw: "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=0\r\nContent-Length: 0\r\n\r\n"},
		{name: "Keep-Alive max only", method: "GET", raw: "HTTP/1.1 200 OK\r\nKeep-Alive: max=3\r\nContent-Length: 0\r\n\r\n", ok: true},
		{name: "Keep-Alive garbage", method: "GET", raw: "HTTP/1.1 200 OK\r\nKeep-Alive: yes please\r\nContent-Length: 0\r\n\r\n", ok: true},
		{name: "HTTP/1.0 keep-alive with timeout", method: "GET", raw: "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nKeep-Alive: timeout=15\r\nContent-Length: 0\r\n\r\n", ok: true, idle: 13500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, resp := readResponse(t, tc.method, tc.raw)
			req.Close = tc.reqClose
			if tc.reqConnection != "" {
				req.Header.Set("Connection", tc.reqConnection)
			}
			ok, idle := Reusable(req, resp)
			if ok != tc.ok || idle != tc.idle {
				t.Errorf("Reusable = %v, %v; want %v, %v", ok, idle, tc.ok, tc.idle)
			}
		})
	}
}

func TestParseKeepAliveReadsTimeoutAndMax(t *testing.T) {
	for _, tc := range []struct {
		values       []string
		timeout, max int
		hasT, hasM   bool
	}{
		{[]string{"timeout=5, max=1000"}, 5, 1000, true, true},
		{[]string{"Timeout=5", "MAX=7"}, 5, 7, true, true},
		{[]string{` timeout = "30" `}, 30, 0, true, false},
		{[]string{"timeout=10, timeout=3"}, 3, 0, true, false},
		{[]string{"timeout=3", "timeout=10"}, 3, 0, true, false},
		{[]string{"timeout=+5, max=-1"}, 0, 0, false, false},
		{[]string{"timeout=5s"}, 0, 0, false, false},
		{[]string{`timeout="5`}, 0, 0, false, false},
		{[]string{"timeout=99999999999999999999999"}, maxKeepAliveNumber, 0, true, false},
		{[]string{"timeout", "=5", "timeout=", ",,,"}, 0, 0, false, false},
		{[]string{"foo=1, timeout=2;x"}, 0, 0, false, false},
		{nil, 0, 0, false, false},
	} {
		timeout, max, hasT, hasM := ParseKeepAlive(tc.values)
		if timeout != tc.timeout || max != tc.max || hasT != tc.hasT || hasM != tc.hasM {
			t.Errorf("ParseKeepAlive(%q) = %d, %d, %v, %v; want %d, %d, %v, %v",
				tc.values, timeout, max, hasT, hasM, tc.timeout, tc.max, tc.hasT, tc.hasM)
		}
	}
}

func TestParseKeepAliveDoesNotAllocate(t *testing.T) {
	values := []string{"timeout=5, max=1000"}
	if n := testing.AllocsPerRun(100, func() { ParseKeepAlive(values) }); n != 0 {
		t.Errorf("ParseKeepAlive allocates %v times", n)
	}
}
