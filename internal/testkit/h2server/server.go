// Package h2server provides scripted HTTP/2 servers for fault tests: TLS with
// ALPN "h2" (a self-signed certificate the test's clients trust), and
// golang.org/x/net/http2's Framer and HPACK underneath, so that each test
// writes exactly the frames it wants, well-formed or not, per connection and
// per stream.
//
// A Server is a faultserver.Server whose connections it takes over (accept,
// TLS, counts, Reset and Close are faultserver's). For each accepted
// connection it asks Config.Conn for that connection's Script. A Script either
// takes the connection raw after the TLS handshake (a server that picked "h2"
// and then speaks HTTP/1.1, or garbage), or lets the Server do the handshake
// properly (read the client preface, send the Script's SETTINGS) and then runs
// on the connection: it reads requests (Conn.Next) and answers them with any
// frames, in any order. Meanwhile a reader goroutine per connection keeps the
// connection alive the way a server must: it acknowledges SETTINGS and PINGs
// (unless the Script says not to), returns flow-control credit for request
// bodies (unless told not to), and records every request it reads.
//
// Every well-behaved response names the request it answers
// (faultserver.Body, "req=<id>" where id is the request's "id" query
// parameter), so that a client that hands one request another's response is
// caught. It never sends traffic anywhere but the connections it accepted.
package h2server

import (
	"context"
	"slices"
	"sync"

	"golang.org/x/net/http2"

	fs "github.com/connactor/connactor/internal/testkit/faultserver"
)

// Script says how one connection is served.
type Script struct {
	// Raw, when set, takes the connection right after the TLS handshake
	// (ALPN picked "h2"), instead of HTTP/2: the rest of the Script is unused.
	Raw func(c *fs.Conn)
	// Settings are the server's SETTINGS frame, its connection preface (nil:
	// MAX_CONCURRENT_STREAMS 100).
	Settings []http2.Setting
	// IgnorePings leaves the client's PINGs unanswered: a connection whose
	// peer is gone without a close.
	IgnorePings bool
	// NoWindowUpdates never returns flow-control credit for request bodies:
	// the client's send windows, once spent, stay empty.
	NoWindowUpdates bool
	// Run serves the connection once the preface is exchanged (nil: Serve with
	// OK). When it returns, the connection stays open and the reader keeps
	// acknowledging frames, until the client or the server closes it; Run
	// calls Conn.Close or Conn.Abort to end it itself.
	Run func(c *Conn)
}

// Config says how a Server serves.
type Config struct {
	// Cert is the certificate the server presents (nil: a fresh
	// faultserver.LoopbackCert); its Pool is what clients must trust.
	Cert *fs.Cert
	// Conn returns the Script of the index-th connection accepted (from 0);
	// nil serves every connection with the zero Script (every request OK).
	Conn func(index int) Script
}

// Seen is the record of one request the server read.
type Seen struct {
	ID     string // the "id" query parameter
	Method string
	Conn   int    // index of the connection
	Stream uint32 // its stream id
}

// Server is a scripted HTTP/2 server on 127.0.0.1. Its methods are safe for
// concurrent use.
type Server struct {
	*fs.Server // Addr, Counts (accepted and closed connections), Wait, Close
	Cert       *fs.Cert

	cfg Config

	mu      sync.Mutex
	seen    []Seen
	changed chan struct{} // closed and replaced whenever seen grows
}

// Start listens on a free port of 127.0.0.1 and serves cfg until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.Cert == nil {
		c, err := fs.LoopbackCert()
		if err != nil {
			return nil, err
		}
		cfg.Cert = c
	}
	if cfg.Conn == nil {
		cfg.Conn = func(int) Script { return Script{} }
	}
	s := &Server{Cert: cfg.Cert, cfg: cfg, changed: make(chan struct{})}
	tlsConf := cfg.Cert.ServerConfig()
	tlsConf.NextProtos = []string{http2.NextProtoTLS}
	fsrv, err := fs.Start(fs.Config{TLS: tlsConf, Raw: s.serve})
	if err != nil {
		return nil, err
	}
	s.Server = fsrv
	return s, nil
}

// URL is the server's base URL, https://127.0.0.1:port.
func (s *Server) URL() string { return "https://" + s.Addr() }

// Seen returns the requests read so far, in order.
func (s *Server) Seen() []Seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen)
}

// ConnsOf returns the indexes of the connections a request named id arrived
// on, in order: more than one when the client sent it again elsewhere.
func (s *Server) ConnsOf(id string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var conns []int
	for _, r := range s.seen {
		if r.ID == id {
			conns = append(conns, r.Conn)
		}
	}
	return conns
}

// WaitSeen blocks until a request named id has arrived, or ctx ends (its
// error is returned). It wakes on every request read, never polls.
func (s *Server) WaitSeen(ctx context.Context, id string) error {
	for {
		s.mu.Lock()
		found := slices.ContainsFunc(s.seen, func(r Seen) bool { return r.ID == id })
		ch := s.changed
		s.mu.Unlock()
		if found {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Server) record(r Seen) {
	s.mu.Lock()
	s.seen = append(s.seen, r)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// serve runs one accepted connection (faultserver's Raw): the Script's Raw,
// or the preface exchange, the reader and the Script's Run.
func (s *Server) serve(fc *fs.Conn) {
	sc := s.cfg.Conn(fc.Index)
	if sc.Raw != nil {
		sc.Raw(fc)
		return
	}
	c, err := newConn(s, fc, sc)
	if err != nil {
		return // the client went away, or sent no HTTP/2 preface
	}
	defer c.wait()
	run := sc.Run
	if run == nil {
		run = func(c *Conn) { Serve(c, func(c *Conn, r *Request) { c.OK(r) }) }
	}
	run(c)
}
