package conn

import (
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// keepAliveMargin is how much earlier than the server's announced Keep-Alive
// timeout a connection is retired, so that the client never sends on a socket the
// server is closing at that very moment (golang/go#15508 is net/http ignoring the
// header; the race it causes is golang/go#22158): a tenth of the timeout, at
// least 100ms.
func keepAliveMargin(d time.Duration) time.Duration {
	m := d / 10
	if m < 100*time.Millisecond {
		m = 100 * time.Millisecond
	}
	return m
}

// maxKeepAliveNumber clamps the numbers of a Keep-Alive header: large enough for
// any real timeout (68 years in seconds), small enough that a Duration of that
// many seconds does not overflow.
const maxKeepAliveNumber = 1<<31 - 1

// Reusable decides, once the exchange of req and resp has finished cleanly,
// whether the connection may serve another request (RFC 9112 sections 9.3 and
// 9.6), and for how long the server is willing to keep it idle (0 = not
// announced). It does not consider the body: a body that was not read to its end
// is the body's business (see body.Close). It is a pure function, safe for
// concurrent use.
//
// Not re-usable: "Connection: close" from either side (req.Close, resp.Close, or
// the token in the request's Connection header); HTTP/1.0 without keep-alive and
// bodies delimited by the connection's close (http.ReadResponse reports both as
// resp.Close); a major version other than 1; protocol switches (101) and
// established CONNECT tunnels, after which the bytes are no longer HTTP/1.1;
// "Keep-Alive: max=0"; a Keep-Alive timeout too short to leave any idle time.
//
// "Keep-Alive: timeout=N" (RFC 2068 section 19.7.1.1, still sent by nginx,
// Apache httpd and many proxies) caps the idle time at N seconds less a margin,
// so that the pool retires the connection a little before the server closes it.
func Reusable(req *http.Request, resp *http.Response) (ok bool, idle time.Duration) {
	if req.Close || resp.Close || resp.ProtoMajor != 1 || resp.StatusCode == http.StatusSwitchingProtocols {
		return false, 0
	}
	if req.Method == http.MethodConnect && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, 0
	}
	if httpguts.HeaderValuesContainsToken(req.Header["Connection"], "close") {
		return false, 0
	}
	ka := resp.Header["Keep-Alive"]
	if len(ka) == 0 {
		return true, 0
	}
	timeout, max, hasTimeout, hasMax := ParseKeepAlive(ka)
	if hasMax && max <= 0 {
		return false, 0
	}
	if !hasTimeout {
		return true, 0
	}
	d := time.Duration(timeout) * time.Second
	d -= keepAliveMargin(d)
	if d <= 0 {
		return false, 0
	}
	return true, d
}

// ParseKeepAlive parses the values of Keep-Alive headers (RFC 2068 section
// 19.7.1.1): comma-separated parameters, of which "timeout" and "max" are
// understood, names case-insensitive, values plain or quoted decimal numbers.
// Malformed parameters are ignored; numbers are clamped to [0, 1<<31-1]; a
// parameter given twice keeps its smallest value (the server's strictest word).
// It is a pure function, safe for concurrent use, and allocates nothing.
func ParseKeepAlive(values []string) (timeout, max int, hasTimeout, hasMax bool) {
	for _, v := range values {
		for len(v) > 0 {
			var part string
			part, v, _ = strings.Cut(v, ",")
			name, val, ok := strings.Cut(part, "=")
			if !ok {
				continue
			}
			name = textproto.TrimString(name)
			val = textproto.TrimString(val)
			if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
				val = val[1 : len(val)-1]
			}
			n, ok := parseDecimal(val)
			if !ok {
				continue
			}
			switch {
			case strings.EqualFold(name, "timeout"):
				if !hasTimeout || n < timeout {
					timeout = n
				}
				hasTimeout = true
			case strings.EqualFold(name, "max"):
				if !hasMax || n < max {
					max = n
				}
				hasMax = true
			}
		}
	}
	return
}

// parseDecimal parses a non-empty string of ASCII digits, clamping it to
// maxKeepAliveNumber. Signs, spaces and anything else make it fail.
func parseDecimal(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n <= maxKeepAliveNumber {
			n = n*10 + int(c-'0')
		}
	}
	if n > maxKeepAliveNumber {
		n = maxKeepAliveNumber
	}
	return n, true
}
