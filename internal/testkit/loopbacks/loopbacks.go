// Package loopbacks serves one HTTP handler on several loopback addresses
// (127.0.0.2, 127.0.0.3, ...) on one port, counting the connections and
// requests of each address: the servers behind a host name whose DNS answer a
// test changes (Resolver). An address can be taken down abruptly (its dials
// refused, its connections cut), shut down gracefully, or brought up again.
//
// Linux routes all of 127.0.0.0/8 to the loopback interface; other systems may
// need the addresses configured first (see Available).
package loopbacks

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// Addr returns 127.0.0.n.
func Addr(n int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(n)}) }

// Addrs returns 127.0.0.from to 127.0.0.to.
func Addrs(from, to int) []netip.Addr {
	var out []netip.Addr
	for n := from; n <= to; n++ {
		out = append(out, Addr(n))
	}
	return out
}

// Available reports whether this machine can listen on 127.0.0.2: the tests
// that use this package skip, saying so, where it cannot.
func Available() bool {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// Options say how the addresses serve.
type Options struct {
	// H2C serves HTTP/2 with prior knowledge as well as HTTP/1.1.
	H2C bool
	// TLS, when set, serves TLS with it (HTTP/2 by ALPN, as net/http does).
	TLS *tls.Config
}

// Counts are one address's counters since the server started.
type Counts struct {
	Accepted, Closed int // connections
	Requests         int
}

// Open is the number of accepted connections not yet closed.
func (c Counts) Open() int { return c.Accepted - c.Closed }

// Server is the handler served on several loopback addresses, one port. Its
// methods are safe for concurrent use.
type Server struct {
	handler http.Handler
	opt     Options
	port    uint16

	mu      sync.Mutex
	sites   map[netip.Addr]*site
	counts  map[netip.Addr]*Counts
	changed chan struct{} // closed and replaced at every change of counts
	closed  bool
	wg      sync.WaitGroup // the sites' Serve goroutines
}

// site is one address's http.Server.
type site struct {
	srv *http.Server
	ln  net.Listener
}

// Start serves handler on each of addrs, on one free port.
func Start(handler http.Handler, opt Options, addrs ...netip.Addr) (*Server, error) {
	if len(addrs) == 0 {
		return nil, errors.New("loopbacks: no address")
	}
	var lastErr error
	for range 20 { // a port free on the first address may be taken on another
		s := &Server{handler: handler, opt: opt, sites: map[netip.Addr]*site{}, counts: map[netip.Addr]*Counts{},
			changed: make(chan struct{})}
		ln, err := net.Listen("tcp", netip.AddrPortFrom(addrs[0], 0).String())
		if err != nil {
			return nil, fmt.Errorf("loopbacks: %w", err)
		}
		s.port = uint16(ln.Addr().(*net.TCPAddr).Port)
		s.serve(addrs[0], ln)
		lastErr = nil
		for _, a := range addrs[1:] {
			if lastErr = s.Up(a); lastErr != nil {
				break
			}
		}
		if lastErr == nil {
			return s, nil
		}
		s.Close()
	}
	return nil, fmt.Errorf("loopbacks: no port free on every address: %w", lastErr)
}

// Port is the port every address serves on.
func (s *Server) Port() uint16 { return s.port }

// AddrPort is a's address and the server's port.
func (s *Server) AddrPort(a netip.Addr) netip.AddrPort { return netip.AddrPortFrom(a, s.port) }

// Up starts serving on a (again); it is an error if a serves already.
func (s *Server) Up(a netip.Addr) error {
	s.mu.Lock()
	_, up := s.sites[a]
	s.mu.Unlock()
	if up {
		return fmt.Errorf("loopbacks: %v serves already", a)
	}
	ln, err := net.Listen("tcp", s.AddrPort(a).String())
	if err != nil {
		return fmt.Errorf("loopbacks: %w", err)
	}
	s.serve(a, ln)
	return nil
}

func (s *Server) serve(a netip.Addr, ln net.Listener) {
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.update(a, func(c *Counts) { c.Requests++ })
			s.handler.ServeHTTP(w, r)
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				s.update(a, func(c *Counts) { c.Accepted++ })
			case http.StateClosed, http.StateHijacked:
				s.update(a, func(c *Counts) { c.Closed++ })
			}
		},
	}
	if s.opt.TLS != nil {
		srv.TLSConfig = s.opt.TLS.Clone() // ServeTLS adds its protocols to it
	}
	if s.opt.H2C {
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
	}
	s.mu.Lock()
	s.sites[a] = &site{srv: srv, ln: ln}
	if s.counts[a] == nil {
		s.counts[a] = &Counts{}
	}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() { // owned by the Server: ends when the site is closed or shut down
		defer s.wg.Done()
		if s.opt.TLS != nil {
			srv.ServeTLS(ln, "", "")
		} else {
			srv.Serve(ln)
		}
	}()
}

// take removes a's site, nil when a does not serve.
func (s *Server) take(a netip.Addr) *site {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.sites[a]
	delete(s.sites, a)
	return st
}

// Down stops serving on a at once: its dials are refused from now, and its
// connections are cut, requests in flight included.
func (s *Server) Down(a netip.Addr) {
	if st := s.take(a); st != nil {
		st.srv.Close()
	}
}

// Shutdown stops serving on a gracefully (http.Server.Shutdown): its dials
// are refused from now, its idle connections close, and the others once
// their response is written; it returns when they have, or ctx ends.
func (s *Server) Shutdown(ctx context.Context, a netip.Addr) error {
	st := s.take(a)
	if st == nil {
		return nil
	}
	err := st.srv.Shutdown(ctx)
	if err != nil {
		st.srv.Close()
	}
	return err
}

// Counts returns each address's counters.
func (s *Server) Counts() map[netip.Addr]Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[netip.Addr]Counts, len(s.counts))
	for a, c := range s.counts {
		out[a] = *c
	}
	return out
}

// Wait blocks until cond holds for the counters, or ctx ends (its error is
// returned). It wakes on every change of the counters, never polls.
func (s *Server) Wait(ctx context.Context, cond func(map[netip.Addr]Counts) bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond(s.Counts()) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Server) update(a netip.Addr, f func(*Counts)) {
	s.mu.Lock()
	c := s.counts[a]
	if c == nil {
		c = &Counts{}
		s.counts[a] = c
	}
	f(c)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// Close stops serving on every address at once and waits for the servers'
// goroutines. Later calls do nothing.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	sites := s.sites
	s.sites = map[netip.Addr]*site{}
	s.mu.Unlock()
	for _, st := range sites {
		st.srv.Close()
	}
	s.wg.Wait()
}
