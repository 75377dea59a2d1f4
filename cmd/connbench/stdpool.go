package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// stdPoolClient is raw's fixed set of connections in a buffered channel, with
// net/http's own HTTP/1.1 code for the exchange (http.Request.Write and
// http.ReadResponse over bufio, as connactor's connection actors use): what a
// request costs when the pool itself is nearly free but the parsing is
// net/http's. Between it and raw lies the cost of that parsing; between it and
// connactor (or net/http's Transport) the cost of the pool.
type stdPoolClient struct {
	pools []chan *stdConn // per route
	s     clientSpec
}

type stdConn struct {
	addr string
	nc   net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
}

func newStdPool(s clientSpec) (*stdPoolClient, error) {
	c := &stdPoolClient{s: s}
	for _, t := range s.targets {
		pool := make(chan *stdConn, s.sc.Conns)
		c.pools = append(c.pools, pool)
		for i := 0; i < s.sc.Conns; i++ {
			sc := &stdConn{addr: t.addr}
			if err := sc.dial(s); err != nil {
				c.close()
				return nil, err
			}
			pool <- sc
		}
	}
	return c, nil
}

func (sc *stdConn) dial(s clientSpec) error {
	s.dials.Add(1)
	nc, err := net.Dial("tcp", sc.addr)
	if err != nil {
		return err
	}
	sc.nc = nc
	if sc.br == nil {
		sc.br, sc.bw = bufio.NewReaderSize(nc, 4096), bufio.NewWriterSize(nc, 4096)
	} else {
		sc.br.Reset(nc)
		sc.bw.Reset(nc)
	}
	return nil
}

func (c *stdPoolClient) close() {
	for _, p := range c.pools {
		close(p)
		for sc := range p {
			if sc.nc != nil {
				sc.nc.Close()
			}
		}
	}
}

func (c *stdPoolClient) newWorker() worker {
	w := &stdPoolWorker{c: c, buf: make([]byte, 32<<10)}
	for _, t := range c.s.targets {
		req, err := http.NewRequest(http.MethodGet, t.url, nil)
		if err != nil {
			panic("connbench: internal error: " + err.Error())
		}
		w.reqs = append(w.reqs, req)
	}
	return w
}

type stdPoolWorker struct {
	c    *stdPoolClient
	reqs []*http.Request
	buf  []byte
}

func (w *stdPoolWorker) do(route int) error {
	pool := w.c.pools[route]
	sc := <-pool
	err := sc.exchange(w.c.s, w.reqs[route], w.buf)
	pool <- sc
	return err
}

func (sc *stdConn) exchange(s clientSpec, req *http.Request, buf []byte) error {
	if sc.nc == nil {
		if err := sc.dial(s); err != nil {
			return err
		}
	}
	fail := func(err error) error {
		sc.nc.Close()
		sc.nc = nil
		return err
	}
	if err := req.Write(sc.bw); err != nil {
		return fail(err)
	}
	if err := sc.bw.Flush(); err != nil {
		return fail(err)
	}
	resp, err := http.ReadResponse(sc.br, req)
	if err != nil {
		return fail(err)
	}
	n := 0
	for {
		m, rerr := resp.Body.Read(buf)
		n += m
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fail(rerr)
		}
	}
	resp.Body.Close()
	if resp.Close {
		sc.nc.Close()
		sc.nc = nil
	}
	return checkResponse(resp.StatusCode, n, s.sc.BodyLen)
}
