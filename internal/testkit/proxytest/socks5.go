package proxytest

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
)

// SOCKS5 is a SOCKS5 proxy (RFC 1928) on 127.0.0.1 that supports CONNECT, with
// username/password authentication (RFC 1929) when started with credentials.
type SOCKS5 struct {
	Addr string // host:port

	user, password string

	ln net.Listener
	wg sync.WaitGroup

	mu      sync.Mutex
	conns   int
	targets []string
	open    map[net.Conn]struct{}
	closed  bool
}

// NewSOCKS5 starts a SOCKS5 proxy; with a non-empty user it requires
// user:password, otherwise it requires no authentication.
func NewSOCKS5(user, password string) *SOCKS5 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("proxytest: listen: " + err.Error())
	}
	s := &SOCKS5{Addr: ln.Addr().String(), user: user, password: password, ln: ln, open: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept() // owned by s; ends when Close closes the listener
	return s
}

// Conns returns how many client connections the proxy accepted.
func (s *SOCKS5) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Targets returns the addresses clients asked to connect to, in order.
func (s *SOCKS5) Targets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.targets...)
}

// Close stops the proxy, closes its connections and waits for its goroutines.
func (s *SOCKS5) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

func (s *SOCKS5) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.open[c] = struct{}{}
		s.conns++
		s.mu.Unlock()
		s.wg.Add(1)
		go func() { // owned by s: ends when either side or Close closes c
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.open, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.serve(c)
		}()
	}
}

func (s *SOCKS5) serve(c net.Conn) {
	br := bufio.NewReader(c)
	// Greeting: VER NMETHODS METHODS...
	var head [2]byte
	if _, err := io.ReadFull(br, head[:]); err != nil || head[0] != 5 {
		return
	}
	methods := make([]byte, head[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	want := byte(0x00) // no authentication
	if s.user != "" {
		want = 0x02 // username/password
	}
	offered := false
	for _, m := range methods {
		offered = offered || m == want
	}
	if !offered {
		c.Write([]byte{5, 0xff})
		return
	}
	c.Write([]byte{5, want})
	if want == 0x02 {
		// RFC 1929: VER ULEN UNAME PLEN PASSWD
		var ver [1]byte
		if _, err := io.ReadFull(br, ver[:]); err != nil || ver[0] != 1 {
			return
		}
		user, ok1 := readLenPrefixed(br)
		pass, ok2 := readLenPrefixed(br)
		if !ok1 || !ok2 || user != s.user || pass != s.password {
			c.Write([]byte{1, 1})
			return
		}
		c.Write([]byte{1, 0})
	}
	// Request: VER CMD RSV ATYP DST.ADDR DST.PORT
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil || req[0] != 5 {
		return
	}
	var host string
	switch req[3] {
	case 1, 4:
		ip := make([]byte, 4)
		if req[3] == 4 {
			ip = make([]byte, 16)
		}
		if _, err := io.ReadFull(br, ip); err != nil {
			return
		}
		host = net.IP(ip).String()
	case 3:
		h, ok := readLenPrefixed(br)
		if !ok {
			return
		}
		host = h
	default:
		return
	}
	var port [2]byte
	if _, err := io.ReadFull(br, port[:]); err != nil {
		return
	}
	target := net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port[:]))))
	s.mu.Lock()
	s.targets = append(s.targets, target)
	s.mu.Unlock()
	if req[1] != 1 {
		c.Write([]byte{5, 7, 0, 1, 0, 0, 0, 0, 0, 0}) // command not supported
		return
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0}) // connection refused
		return
	}
	defer up.Close()
	if _, err := c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0}); err != nil {
		return
	}
	Relay(c, br, up)
}

func readLenPrefixed(br *bufio.Reader) (string, bool) {
	n, err := br.ReadByte()
	if err != nil {
		return "", false
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", false
	}
	return string(b), true
}
