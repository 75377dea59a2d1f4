package conn

import (
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// keepAliveMargin is how much earlier than the server's announced Keep-Alive
// timeout a connection is retired, so that the client never sends on a socket the
// server is closing at that very moment (golang/go#15508 is net/http ignoring the
// header; the race it causes is golang/go#22158).
func keepAliveMargin(d time.Duration) time.Duration {
	m := d / 10
	if m < 100*time.Millisecond {
		m = 100 * time.Millisecond
	}
	return m
}

// Reusable decides, once the exchange of req and resp has finished cleanly,
// whether the connection may serve another request (RFC 9112 section 9.3 and 9.6),
// and for how long the server is willing to keep it idle (0 = not announced).
// It does not consider the body: a body that was not read to its end is the
// caller's business (see Body). It is a pure function.
//
// Not re-usable: "Connection: close" from either side (req.Close, resp.Close);
// HTTP/1.0 without keep-alive and bodies delimited by the connection's close
// (http.ReadResponse reports both as resp.Close); protocol switches (101);
// "Keep-Alive: timeout=0" or "max=0".
func Reusable(req *http.Request, resp *http.Response) (ok bool, idle time.Duration) {
	if req.Close || resp.Close || resp.StatusCode == http.StatusSwitchingProtocols {
		return false, 0
	}
	if hasToken(req.Header["Connection"], "close") {
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
	if timeout <= 0 {
		return false, 0
	}
	d := time.Duration(timeout) * time.Second
	d -= keepAliveMargin(d)
	if d <= 0 {
		return false, 0
	}
	return true, d
}

// ParseKeepAlive parses the Keep-Alive header values (RFC 2068 section 19.7.1.1,
// still sent by Apache httpd, nginx and many proxies): a comma-separated list of
// parameters, of which "timeout" and "max" are understood. Malformed parameters
// are ignored; numbers are clamped to [0, 1<<31). It is a pure function.
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
			val = strings.Trim(textproto.TrimString(val), `"`)
			n, ok := parseNonNegative(val)
			if !ok {
				continue
			}
			switch {
			case strings.EqualFold(name, "timeout"):
				timeout, hasTimeout = n, true
			case strings.EqualFold(name, "max"):
				max, hasMax = n, true
			}
		}
	}
	return
}

func parseNonNegative(s string) (int, bool) {
	if s == "" || len(s) > 12 {
		if len(s) > 12 && strings.Trim(s, "0123456789") == "" {
			return 1<<31 - 1, true
		}
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	if n > 1<<31-1 {
		n = 1<<31 - 1
	}
	return n, true
}

func hasToken(values []string, token string) bool {
	for _, v := range values {
		for len(v) > 0 {
			var t string
			t, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(textproto.TrimString(t), token) {
				return true
			}
		}
	}
	return false
}
