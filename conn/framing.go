package conn

import (
	"bufio"
	"bytes"
	"net/http"
)

// rawHead remembers where a response head starts in the connection's
// bufio.Reader, so that after http.ReadResponse the head's bytes can still be
// looked at, without a copy, while they are in the reader's buffer. It costs
// two field reads per head; the look itself happens only for chunked and HTTP/1.0 responses.
type rawHead struct {
	buf      []byte // the buffered bytes when the head started (aliases the reader's buffer)
	socketAt int64  // countingReader.n then
}

// mark records the reader's state before a head is parsed.
func (h *rawHead) mark(br *bufio.Reader, rd *countingReader) {
	h.buf, _ = br.Peek(br.Buffered()) // never an error: at most what is buffered
	h.socketAt = rd.n
}

// ambiguous reports, for the final head just parsed into resp, whether its
// framing is one the connection cannot be trusted after (only the raw head
// shows it: http.ReadResponse deletes both fields):
//
//   - Content-Length together with Transfer-Encoding: chunked (RFC 9112
//     section 6.3: "ought to be handled as an error");
//   - Transfer-Encoding in an HTTP/1.0 response (RFC 9112 section 6.1: treat
//     the framing as faulty and close the connection after the message).
//
// Other responses cost a field test. When the head did not arrive in one read,
// the reader has moved its buffer since mark and the raw head is gone; such a
// response reports true: its framing could not be verified.
func (h *rawHead) ambiguous(resp *http.Response, br *bufio.Reader, rd *countingReader) bool {
	var field string
	switch {
	case resp.TransferEncoding != nil: // ReadResponse sets it for chunked bodies only
		field = "content-length:"
	case resp.ProtoMinor == 0:
		field = "transfer-encoding:"
	default:
		return false
	}
	if rd.n != h.socketAt {
		return true
	}
	n := len(h.buf) - br.Buffered() // the head's length
	if n < 0 || n > len(h.buf) {
		return true
	}
	return hasField(h.buf[:n], field)
}

// hasField reports whether head has a field line starting with name (lower
// case, colon included), in any letter case (field names are case-insensitive,
// RFC 9110 section 5.1).
func hasField(head []byte, name string) bool {
	for {
		i := bytes.IndexByte(head, '\n')
		if i < 0 {
			return false
		}
		head = head[i+1:]
		if len(head) < len(name) {
			return false
		}
		match := true
		for j := 0; j < len(name); j++ {
			if lower(head[j]) != name[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
}

func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}
