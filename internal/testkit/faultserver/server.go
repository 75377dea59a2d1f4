// Package faultserver provides scripted byte-level HTTP/1.1 servers for fault
// tests, and the client-side instruments those tests read: a dialer that counts
// sockets, a resolver that answers NXDOMAIN without leaving the process, TLS
// certificates that are expired or name the wrong host, and descriptor and
// goroutine counts.
//
// A Server listens on 127.0.0.1, counts the connections it accepts and closes,
// reads each request head (with net/http's own http.ReadRequest, and the body
// unless told not to) and hands it to a Handler, which answers with raw bytes:
// well-formed or not, all at once or a byte at a time, followed by a graceful
// close or a reset. It never sends traffic anywhere but the connections it
// accepted.
//
// Every well-behaved response a handler writes should name the request it
// answers (Body gives the convention, "req=<id>"), so that a client that reads
// one request's response as another's is caught.
package faultserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
)

// Handler answers one request on c. It runs on the connection's goroutine; when
// it returns, the server reads the next request on c, unless c was closed. It may
// block (Conn.Hold, Conn.Sleep): Server.Close and the client's close end those
// waits.
type Handler func(c *Conn, r *Request)

// Config says how a Server serves its connections.
type Config struct {
	// Handler answers each request (nil: every request gets OK).
	Handler Handler
	// Raw, when set, takes over each accepted connection instead of the request
	// loop: a server that never answers (Conn.Hold), or that speaks first.
	Raw func(c *Conn)
	// TLS, when set, serves TLS with this configuration (the handshake happens
	// on the first read).
	TLS *tls.Config
	// KeepBodyUnread leaves request bodies unread: the handler sees the head
	// only, and must close the connection when it is done (the unread body would
	// otherwise be parsed as the next request).
	KeepBodyUnread bool
}

// Request is one request as the server read it.
type Request struct {
	*http.Request        // the head; Body is drained unless Config.KeepBodyUnread
	ID            string // the "id" query parameter: the name responses repeat
	Conn          int    // index of the connection it arrived on (0 = first accepted)
	N             int    // index of the request on its connection (0 = first)
	Body          []byte // the body that was read (nil with KeepBodyUnread)
}

// Seen is the record of one request the server read.
type Seen struct {
	ID         string
	Method     string
	Conn, N    int
	BodyLength int
}

// Counts is a snapshot of a Server's counters.
type Counts struct {
	Accepted int // connections accepted
	Closed   int // accepted connections closed (by either side; the server's socket is closed)
	Requests int // request heads read
}

// Open is the number of accepted connections not yet closed.
func (c Counts) Open() int { return c.Accepted - c.Closed }

// Server is a scripted server on 127.0.0.1. Its methods are safe for concurrent
// use.
type Server struct {
	ln  net.Listener
	cfg Config
	wg  sync.WaitGroup // the accept loop and one goroutine per connection

	mu      sync.Mutex
	counts  Counts
	seen    []Seen
	conns   map[*Conn]struct{}
	changed chan struct{} // closed and replaced whenever counts change
	closing bool
	done    chan struct{} // closed by Close: ends every Hold and Sleep
}

// Start listens on a free port of 127.0.0.1 and serves cfg until Close.
func Start(cfg Config) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if cfg.Handler == nil {
		cfg.Handler = func(c *Conn, r *Request) { c.Write(OK(r.ID)) }
	}
	s := &Server{ln: ln, cfg: cfg, conns: make(map[*Conn]struct{}),
		changed: make(chan struct{}), done: make(chan struct{})}
	s.wg.Add(1)
	go s.accept() // owned by s.wg: Close waits for it
	return s, nil
}

// Addr is the server's "127.0.0.1:port".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the server's base URL: http://127.0.0.1:port, or https:// with TLS.
func (s *Server) URL() string {
	if s.cfg.TLS != nil {
		return "https://" + s.Addr()
	}
	return "http://" + s.Addr()
}

// Counts returns the server's counters.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// Seen returns the requests read so far, in order.
func (s *Server) Seen() []Seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Seen(nil), s.seen...)
}

// ConnOf returns the index of the connection the request named id arrived on,
// and false if no such request was read.
func (s *Server) ConnOf(id string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.seen {
		if r.ID == id {
			return r.Conn, true
		}
	}
	return 0, false
}

// Wait blocks until cond holds for the server's counters, or ctx ends (its
// error is returned). It wakes on every change of the counters, never polls.
func (s *Server) Wait(ctx context.Context, cond func(Counts) bool) error {
	for {
		s.mu.Lock()
		ok, ch := cond(s.counts), s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops accepting, closes every connection and waits for their
// goroutines. It returns nil; later calls do nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	close(s.done)
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.ln.Close()
	for _, c := range conns {
		c.tcp.Close() // unblocks its reads and writes (no TLS alert); its goroutine counts the close
	}
	s.wg.Wait()
	return nil
}

// update changes the counters under the lock and wakes Wait.
func (s *Server) update(f func(*Counts)) {
	s.mu.Lock()
	f(&s.counts)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			return
		}
		c := &Conn{tcp: nc, nc: nc, srv: s, Index: s.counts.Accepted}
		if s.cfg.TLS != nil {
			c.nc = tls.Server(nc, s.cfg.TLS)
		}
		s.conns[c] = struct{}{}
		s.counts.Accepted++
		close(s.changed)
		s.changed = make(chan struct{})
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c) // owned by s.wg: Close closes the socket and waits
	}
}

// serve runs one connection: Raw, or the request loop.
func (s *Server) serve(c *Conn) {
	defer s.wg.Done()
	defer func() {
		c.closeOnce(func() error { return c.nc.Close() })
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.update(func(n *Counts) { n.Closed++ })
	}()
	if s.cfg.Raw != nil {
		s.cfg.Raw(c)
		return
	}
	br := bufio.NewReader(c.nc)
	for n := 0; !c.isClosed(); n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return // EOF, a reset, garbage, or the server closing
		}
		r := &Request{Request: req, ID: req.URL.Query().Get("id"), Conn: c.Index, N: n}
		if !s.cfg.KeepBodyUnread {
			r.Body, err = io.ReadAll(req.Body)
			if err != nil && !errors.Is(err, io.EOF) {
				return
			}
		}
		s.mu.Lock()
		s.seen = append(s.seen, Seen{ID: r.ID, Method: req.Method, Conn: c.Index, N: n, BodyLength: len(r.Body)})
		s.mu.Unlock()
		s.update(func(n *Counts) { n.Requests++ })
		s.cfg.Handler(c, r)
	}
}
