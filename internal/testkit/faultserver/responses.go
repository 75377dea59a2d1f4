package faultserver

import (
	"strconv"
	"strings"
)

// Body is the body of a well-behaved response to the request named id:
// "req=<id>". A client that hands one request another's response shows it here.
func Body(id string) string { return "req=" + id }

// OK is a complete, well-formed keep-alive response to the request named id:
// 200, Content-Length, Body(id).
func OK(id string) string {
	b := Body(id)
	return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
		strconv.Itoa(len(b)) + "\r\n\r\n" + b
}

// Chunked is a complete, well-formed chunked response to the request named id,
// its body Body(id) in one chunk.
func Chunked(id string) string {
	b := Body(id)
	return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n" +
		Chunk(b) + "0\r\n\r\n"
}

// Chunk is one chunk of a chunked body: size in hex, CRLF, data, CRLF.
func Chunk(data string) string {
	return strconv.FormatInt(int64(len(data)), 16) + "\r\n" + data + "\r\n"
}

// Head builds a response head from a status line ("HTTP/1.1 200 OK") and
// header lines, unchecked: whatever the caller wants on the wire, CRLF-joined,
// with the blank line that ends the head.
func Head(status string, headers ...string) string {
	var sb strings.Builder
	sb.WriteString(status)
	sb.WriteString("\r\n")
	for _, h := range headers {
		sb.WriteString(h)
		sb.WriteString("\r\n")
	}
	sb.WriteString("\r\n")
	return sb.String()
}

// ContentLength is the header line "Content-Length: n" for body b.
func ContentLength(b string) string { return "Content-Length: " + strconv.Itoa(len(b)) }
