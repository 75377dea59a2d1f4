package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	fs "github.com/connactor/connactor/internal/testkit/faultserver"
	"github.com/connactor/connactor/internal/testkit/toxi"
)

// bigPadding follows "req=<id>\n" in /big's body: enough that an early close
// leaves a remainder to drain or to close the connection over.
const bigPadding = 32 << 10

var padding = strings.Repeat("0123456789abcdef", bigPadding/16)

// expectedBody is the body a correct response to path for id carries.
func expectedBody(path, id string) string {
	if path == "/big" {
		return fs.Body(id) + "\n" + padding
	}
	return fs.Body(id)
}

// handle is every route's server: each path is one behaviour, good or faulty,
// and every answer that has a body names its request.
func handle(c *fs.Conn, r *fs.Request) {
	id := r.ID
	switch r.URL.Path {
	case "/ok":
		c.Write(fs.OK(id))
	case "/chunked":
		c.Write(fs.Chunked(id))
	case "/big":
		b := expectedBody("/big", id)
		c.Write(fs.Head("HTTP/1.1 200 OK", fs.ContentLength(b)) + b)
	case "/extra": // a body longer than its Content-Length (response desync)
		c.Write(fs.OK(id) + fs.OK("bogus"))
	case "/cl-te": // Content-Length with chunked (request smuggling's shape)
		c.Write(fs.Head("HTTP/1.1 200 OK", "Content-Length: 99", "Transfer-Encoding: chunked") +
			fs.Chunk(fs.Body(id)) + "0\r\n\r\n")
	case "/close": // closes after the response, without saying so (the probe's case)
		c.WriteAndClose(fs.OK(id))
	case "/rst": // a reset in the middle of the body
		c.Write(fs.Head("HTTP/1.1 200 OK", "Content-Length: 1000") + fs.Body(id))
		c.Reset()
	case "/trunc": // a chunked body cut short by a FIN
		c.Write(fs.Head("HTTP/1.1 200 OK", "Transfer-Encoding: chunked") + fs.Chunk(fs.Body(id)))
		c.Close()
	case "/status0":
		c.Write(fs.Head("HTTP/1.1 0 Zero", fs.ContentLength(fs.Body(id))) + fs.Body(id))
	case "/slow": // slowloris: a byte every 100ms, past ResponseHeaderTimeout
		c.WriteSlowly(fs.OK(id), 100*time.Millisecond)
		c.Close()
	case "/stall": // never answers
		c.Hold()
	default:
		c.Write(fs.Head("HTTP/1.1 404 Not Found", "Content-Length: 0"))
	}
}

// route is one of the soak's destinations: a scripted server, reached directly
// or through a toxiproxy proxy (then addr is the proxy's listener).
type route struct {
	addr  string
	srv   *fs.Server
	proxy *toxiproxy.Proxy // nil: direct
	toxic string           // the proxy's permanent toxic, for the report
}

// kind says how the route is reached, for the report.
func (r *route) kind() string {
	switch {
	case r.proxy == nil:
		return "direct"
	case r.toxic == "":
		return "toxiproxy"
	default:
		return "toxiproxy, " + r.toxic
	}
}

// fleet is the soak's servers and proxies.
type fleet struct {
	routes []*route
	tp     *toxi.Server // nil without toxiproxy
}

// startFleet starts n scripted servers; the first proxied of them are reached
// through toxiproxy proxies with a permanent toxic each (latency, slicer,
// bandwidth, or none).
func startFleet(n, proxied int, tp *toxi.Server) (*fleet, error) {
	f := &fleet{tp: tp}
	for i := 0; i < n; i++ {
		s, err := fs.Start(fs.Config{Handler: handle})
		if err != nil {
			f.close()
			return nil, err
		}
		r := &route{addr: s.Addr(), srv: s}
		f.routes = append(f.routes, r)
		if tp == nil || i >= proxied {
			continue
		}
		p, err := tp.Proxy("soak", s.Addr())
		if err != nil {
			f.close()
			return nil, err
		}
		r.proxy, r.addr = p, p.Listen
		var typ string
		var attrs toxiproxy.Attributes
		switch i % 4 {
		case 0:
			typ, attrs = "latency", toxiproxy.Attributes{"latency": 2, "jitter": 1}
		case 1:
			typ, attrs = "slicer", toxiproxy.Attributes{"average_size": 64, "size_variation": 32, "delay": 50}
		case 2:
			typ, attrs = "bandwidth", toxiproxy.Attributes{"rate": 10 << 10}
		}
		if typ != "" {
			if _, err := p.AddToxic("base", typ, "downstream", 1, attrs); err != nil {
				f.close()
				return nil, fmt.Errorf("toxic %s on %s: %w", typ, p.Name, err)
			}
			r.toxic = typ
		}
	}
	return f, nil
}

func (f *fleet) close() {
	for _, r := range f.routes {
		if r.proxy != nil {
			r.proxy.Delete()
		}
		r.srv.Close()
	}
}

// chaos turns short-lived reset_peer and timeout toxics on and off on random
// proxied routes until stop is closed. It returns how many it applied.
type chaos struct {
	fleet *fleet
	stop  chan struct{}
	done  sync.WaitGroup

	mu      sync.Mutex
	applied map[string]int
	errors  int
}

func startChaos(f *fleet, seed uint64) *chaos {
	c := &chaos{fleet: f, stop: make(chan struct{}), applied: map[string]int{}}
	var proxied []*route
	for _, r := range f.routes {
		if r.proxy != nil {
			proxied = append(proxied, r)
		}
	}
	if len(proxied) == 0 {
		return c
	}
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	c.done.Add(1)
	go func() { // owned by c.done: stopChaos waits for it
		defer c.done.Done()
		for {
			select {
			case <-c.stop:
				return
			case <-time.After(time.Duration(100+rng.IntN(200)) * time.Millisecond):
			}
			r := proxied[rng.IntN(len(proxied))]
			typ, attrs := "reset_peer", toxiproxy.Attributes{"timeout": rng.IntN(20)}
			if rng.IntN(2) == 0 {
				typ, attrs = "timeout", toxiproxy.Attributes{"timeout": 0}
			}
			if _, err := r.proxy.AddToxic("chaos", typ, "downstream", 1, attrs); err != nil {
				c.count("", true)
				continue
			}
			c.count(typ, false)
			select {
			case <-c.stop:
			case <-time.After(time.Duration(50+rng.IntN(150)) * time.Millisecond):
			}
			if err := r.proxy.RemoveToxic("chaos"); err != nil {
				c.count("", true)
			}
		}
	}()
	return c
}

func (c *chaos) count(typ string, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if failed {
		c.errors++
		return
	}
	c.applied[typ]++
}

// stopChaos stops the toggling and returns what it applied.
func (c *chaos) stopChaos() (applied map[string]int, errors int) {
	close(c.stop)
	c.done.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applied, c.errors
}
