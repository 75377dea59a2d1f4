package h2server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	fs "github.com/connactor/connactor/internal/testkit/faultserver"
)

// Request is one request as the server read it: its HEADERS (and
// CONTINUATION) frames, decoded. Its body, if any, is counted but not kept.
type Request struct {
	Stream    uint32
	Method    string
	Path      string // the :path pseudo-header, query included
	ID        string // the "id" query parameter: the name responses repeat
	Header    http.Header
	EndStream bool // the HEADERS ended the stream: no body follows
	Conn      int  // index of the connection it arrived on
}

// Conn is one HTTP/2 connection as its Script sees it. Its methods are safe
// for concurrent use (the Script's goroutine and the reader's write on it).
type Conn struct {
	Index int // accept order, from 0

	fc  *fs.Conn
	srv *Server
	sc  Script
	rd  *http2.Framer // the reader goroutine's only

	wmu  sync.Mutex // guards the writing Framer, the HPACK encoder and its buffer
	wr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder

	mu         sync.Mutex // guards the fields below
	queue      []*Request // read, not yet taken by Next
	settingAck int        // SETTINGS ACKs received
	pingAcks   map[[8]byte]bool
	resets     map[uint32]http2.ErrCode // RST_STREAM frames the client sent
	ended      bool                     // the reader is over: the connection is gone
	changed    chan struct{}            // closed and replaced whenever the fields above change
	pingSeq    uint64

	readDone chan struct{}
}

// writer adapts the faultserver connection for a Framer.
type writer struct{ fc *fs.Conn }

func (w writer) Write(p []byte) (int, error) {
	if err := w.fc.Write(string(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// newConn exchanges the connection preface on fc (RFC 9113 section 3.4): it
// reads the client's, sends sc's SETTINGS, and starts the reader.
func newConn(s *Server, fc *fs.Conn, sc Script) (*Conn, error) {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(fc.Reader(), preface); err != nil {
		return nil, err
	}
	if string(preface) != http2.ClientPreface {
		return nil, errors.New("h2server: not an HTTP/2 client preface")
	}
	c := &Conn{Index: fc.Index, fc: fc, srv: s, sc: sc,
		rd:       http2.NewFramer(nil, fc.Reader()),
		wr:       http2.NewFramer(writer{fc}, nil),
		pingAcks: make(map[[8]byte]bool), resets: make(map[uint32]http2.ErrCode),
		changed: make(chan struct{}), readDone: make(chan struct{})}
	c.rd.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	settings := sc.Settings
	if settings == nil {
		settings = []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 100}}
	}
	if err := c.write(func(fr *http2.Framer) error { return fr.WriteSettings(settings...) }); err != nil {
		return nil, err
	}
	go c.read() // owned by the Conn: the server's serve waits for it (wait)
	return c, nil
}

// wait waits for the reader to end: the client closed, or the server did.
func (c *Conn) wait() { <-c.readDone }

// read handles the client's frames until the connection ends: it acknowledges
// SETTINGS and PINGs, returns flow-control credit and queues requests.
func (c *Conn) read() {
	defer close(c.readDone)
	defer c.update(func() { c.ended = true })
	for {
		f, err := c.rd.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				continue // a malformed request: that stream only
			}
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				c.update(func() { c.settingAck++ })
			} else {
				c.write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if f.IsAck() {
				c.update(func() { c.pingAcks[f.Data] = true })
			} else if !c.sc.IgnorePings {
				c.write(func(fr *http2.Framer) error { return fr.WritePing(true, f.Data) })
			}
		case *http2.MetaHeadersFrame:
			r := c.request(f)
			c.srv.record(Seen{ID: r.ID, Method: r.Method, Conn: c.Index, Stream: r.Stream})
			c.update(func() { c.queue = append(c.queue, r) })
		case *http2.DataFrame:
			if n := f.Length; n > 0 && !c.sc.NoWindowUpdates {
				c.write(func(fr *http2.Framer) error {
					if err := fr.WriteWindowUpdate(0, n); err != nil || f.StreamEnded() {
						return err
					}
					return fr.WriteWindowUpdate(f.StreamID, n)
				})
			}
		case *http2.RSTStreamFrame:
			c.update(func() { c.resets[f.StreamID] = f.ErrCode })
		}
	}
}

func (c *Conn) request(f *http2.MetaHeadersFrame) *Request {
	r := &Request{Stream: f.StreamID, Method: f.PseudoValue("method"), Path: f.PseudoValue("path"),
		Header: make(http.Header), EndStream: f.StreamEnded(), Conn: c.Index}
	for _, hf := range f.RegularFields() {
		r.Header.Add(hf.Name, hf.Value)
	}
	if u, err := url.ParseRequestURI(r.Path); err == nil {
		r.ID = u.Query().Get("id")
	}
	return r
}

// update changes the reader's state under the lock and wakes the waits.
func (c *Conn) update(f func()) {
	c.mu.Lock()
	f()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// await blocks until cond holds (true), or the connection or the server ends
// first (false). cond runs under the lock.
func (c *Conn) await(cond func() bool) bool {
	for {
		c.mu.Lock()
		ok, ended, ch := cond(), c.ended, c.changed
		c.mu.Unlock()
		if ok {
			return true
		}
		if ended {
			return false
		}
		if c.fc.Await(ch) != nil {
			return false // the server is closing
		}
	}
}

// Next returns the next request read on the connection, waiting for it; false
// when the connection ends first.
func (c *Conn) Next() (*Request, bool) {
	var r *Request
	ok := c.await(func() bool {
		if len(c.queue) == 0 {
			return false
		}
		r, c.queue = c.queue[0], c.queue[1:]
		return true
	})
	return r, ok
}

// ResetBy reports whether the client reset stream id (RST_STREAM), and its
// code.
func (c *Conn) ResetBy(id uint32) (http2.ErrCode, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	code, ok := c.resets[id]
	return code, ok
}

// write runs f on the writing Framer, alone.
func (c *Conn) write(f func(fr *http2.Framer) error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return f(c.wr)
}

// headerBlockLocked encodes a response head, :status then fields, with wmu
// held.
func (c *Conn) headerBlockLocked(status int, fields []hpack.HeaderField) []byte {
	c.hbuf.Reset()
	c.enc.WriteField(hpack.HeaderField{Name: ":status", Value: strconv.Itoa(status)})
	for _, f := range fields {
		c.enc.WriteField(f)
	}
	return c.hbuf.Bytes()
}

// Headers sends a response head on stream: HEADERS with END_HEADERS, and
// END_STREAM when end is set.
func (c *Conn) Headers(stream uint32, status int, end bool, fields ...hpack.HeaderField) error {
	return c.write(func(fr *http2.Framer) error {
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream,
			BlockFragment: c.headerBlockLocked(status, fields), EndHeaders: true, EndStream: end})
	})
}

// Data sends one DATA frame on stream, with END_STREAM when end is set.
func (c *Conn) Data(stream uint32, data string, end bool) error {
	return c.write(func(fr *http2.Framer) error { return fr.WriteData(stream, end, []byte(data)) })
}

// Respond answers r with status and body: HEADERS (content-type,
// content-length), then the body in one DATA frame that ends the stream.
func (c *Conn) Respond(r *Request, status int, body string) error {
	fields := []hpack.HeaderField{{Name: "content-type", Value: "text/plain"},
		{Name: "content-length", Value: strconv.Itoa(len(body))}}
	if err := c.Headers(r.Stream, status, body == "", fields...); err != nil || body == "" {
		return err
	}
	return c.Data(r.Stream, body, true)
}

// OK answers r well: 200 and faultserver.Body(r.ID).
func (c *Conn) OK(r *Request) error { return c.Respond(r, http.StatusOK, fs.Body(r.ID)) }

// ResetStream sends RST_STREAM with code on stream.
func (c *Conn) ResetStream(stream uint32, code http2.ErrCode) error {
	return c.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(stream, code) })
}

// GoAway sends GOAWAY: streams above last were not processed.
func (c *Conn) GoAway(last uint32, code http2.ErrCode, debug string) error {
	return c.write(func(fr *http2.Framer) error { return fr.WriteGoAway(last, code, []byte(debug)) })
}

// Settings sends a SETTINGS frame and waits for the client to acknowledge it
// (it has applied the settings then: RFC 9113 section 6.5.3). It reports false
// when the connection ended first.
func (c *Conn) Settings(ss ...http2.Setting) bool {
	c.mu.Lock()
	want := c.settingAck + 1
	c.mu.Unlock()
	if c.write(func(fr *http2.Framer) error { return fr.WriteSettings(ss...) }) != nil {
		return false
	}
	return c.await(func() bool { return c.settingAck >= want })
}

// Sync sends a PING and waits for its acknowledgement: the client reads
// frames in order, so by then it has handled every frame written before. It
// reports false when the connection ended first.
func (c *Conn) Sync() bool {
	c.mu.Lock()
	c.pingSeq++
	var data [8]byte
	copy(data[:], strconv.FormatUint(c.pingSeq, 16))
	c.mu.Unlock()
	if c.write(func(fr *http2.Framer) error { return fr.WritePing(false, data) }) != nil {
		return false
	}
	return c.await(func() bool { return c.pingAcks[data] })
}

// ContinuationFlood starts a response head on stream and never ends it: a
// HEADERS frame without END_HEADERS, then CONTINUATION frames of 16 KiB of
// header fields each, until limit bytes were sent or a write fails (the
// client closed the connection). It returns the bytes of header block sent.
func (c *Conn) ContinuationFlood(stream uint32, limit int) int {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	sent := 0
	first := c.headerBlockLocked(http.StatusOK, nil)
	if c.wr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: first}) != nil {
		return 0
	}
	sent += len(first)
	var frag bytes.Buffer
	enc := hpack.NewEncoder(&frag)
	value := string(bytes.Repeat([]byte("f"), 1000))
	for i := 0; frag.Len() < 16<<10-1100; i++ {
		// Never indexed: each fragment stands alone, and the decoder's table
		// does not grow.
		enc.WriteField(hpack.HeaderField{Name: "x-flood-" + strconv.Itoa(i), Value: value, Sensitive: true})
	}
	for sent < limit {
		if c.wr.WriteContinuation(stream, false, frag.Bytes()) != nil {
			break
		}
		sent += frag.Len()
	}
	return sent
}

// WriteRaw writes b as is, between frames: part of a frame, or bytes that are
// no frame at all.
func (c *Conn) WriteRaw(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.fc.Write(string(b))
}

// Frame returns the bytes of the frame f writes, for WriteRaw (to send part of
// it).
func Frame(f func(fr *http2.Framer) error) []byte {
	var b bytes.Buffer
	if err := f(http2.NewFramer(&b, nil)); err != nil {
		panic("h2server: " + err.Error())
	}
	return b.Bytes()
}

// Close closes the connection (a TCP FIN after TLS's close_notify).
func (c *Conn) Close() { c.fc.Close() }

// Abort resets the connection: a TCP RST, unsent data dropped.
func (c *Conn) Abort() { c.fc.Reset() }

// Await waits until ch is closed (nil), or the server closes
// (faultserver.ErrClosed).
func (c *Conn) Await(ch <-chan struct{}) error { return c.fc.Await(ch) }

// Serve answers every request of the connection with h, one after the
// other, until the connection ends.
func Serve(c *Conn, h func(c *Conn, r *Request)) {
	for {
		r, ok := c.Next()
		if !ok {
			return
		}
		h(c, r)
	}
}
