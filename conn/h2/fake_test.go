package h2

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// A scripted HTTP/2 server (h2c, prior knowledge) built on x/net's Framer and
// HPACK, for what Go's server does not do on demand: refuse a stream, or send
// GOAWAY with a chosen last stream id. It serves one connection: it reads the
// client preface, sends its SETTINGS, and runs script, which reads requests and
// answers them as it likes; then it keeps acknowledging SETTINGS and PINGs
// until the client goes away.

// fakeConn is the server's side of the connection, used by one script.
type fakeConn struct {
	t    *testing.T
	nc   net.Conn
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
}

// startFake listens on 127.0.0.1, serves the first connection with script and
// returns the address to dial. Its goroutine ends at cleanup.
func startFake(t *testing.T, script func(f *fakeConn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var accepted net.Conn
	wg.Add(1)
	go func() { // owned by the test: cleanup waits
		defer wg.Done()
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		mu.Lock()
		accepted = nc
		mu.Unlock()
		defer nc.Close()
		f := &fakeConn{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
		f.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		f.enc = hpack.NewEncoder(&f.hbuf)
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(nc, preface); err != nil || string(preface) != http2.ClientPreface {
			t.Errorf("fake server: bad client preface %q (%v)", preface, err)
			return
		}
		if err := f.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 100}); err != nil {
			return
		}
		script(f)
		for f.next() != nil {
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		if accepted != nil {
			accepted.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// next reads one frame, acknowledging SETTINGS and PINGs; nil when the
// connection is over.
func (f *fakeConn) next() http2.Frame {
	fr, err := f.fr.ReadFrame()
	if err != nil {
		return nil
	}
	switch fr := fr.(type) {
	case *http2.SettingsFrame:
		if !fr.IsAck() {
			f.fr.WriteSettingsAck()
		}
	case *http2.PingFrame:
		if !fr.IsAck() {
			f.fr.WritePing(true, fr.Data)
		}
	}
	return fr
}

// request reads frames until a request's HEADERS and returns its stream id and
// path; 0 when the connection ended first.
func (f *fakeConn) request() (uint32, string) {
	for {
		fr := f.next()
		if fr == nil {
			return 0, ""
		}
		if mh, ok := fr.(*http2.MetaHeadersFrame); ok {
			return mh.StreamID, mh.PseudoValue("path")
		}
	}
}

// respond answers stream id with status and body.
func (f *fakeConn) respond(id uint32, status int, body string) {
	f.hbuf.Reset()
	f.enc.WriteField(hpack.HeaderField{Name: ":status", Value: strconv.Itoa(status)})
	f.enc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(body))})
	err := f.fr.WriteHeaders(http2.HeadersFrameParam{
		StreamID:      id,
		BlockFragment: f.hbuf.Bytes(),
		EndHeaders:    true,
		EndStream:     body == "",
	})
	if err == nil && body != "" {
		err = f.fr.WriteData(id, true, []byte(body))
	}
	if err != nil {
		f.t.Errorf("fake server: respond on stream %d: %v", id, err)
	}
}

// refuse resets stream id with REFUSED_STREAM.
func (f *fakeConn) refuse(id uint32) {
	if err := f.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream); err != nil {
		f.t.Errorf("fake server: refuse stream %d: %v", id, err)
	}
}

// goAway sends a graceful GOAWAY whose last stream id is last.
func (f *fakeConn) goAway(last uint32) { f.goAwayCode(last, http2.ErrCodeNo) }

// goAwayCode sends a GOAWAY with an error code.
func (f *fakeConn) goAwayCode(last uint32, code http2.ErrCode) {
	if err := f.fr.WriteGoAway(last, code, nil); err != nil {
		f.t.Errorf("fake server: GOAWAY: %v", err)
	}
}

// setLimit sends SETTINGS_MAX_CONCURRENT_STREAMS n and reads frames until the
// client acknowledges it: the client's engine has applied it then (RFC 9113
// section 6.5.3). It reports false when the connection ended first.
func (f *fakeConn) setLimit(n uint32) bool {
	if err := f.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: n}); err != nil {
		return false
	}
	for {
		fr := f.next()
		if fr == nil {
			return false
		}
		if s, ok := fr.(*http2.SettingsFrame); ok && s.IsAck() {
			return true
		}
	}
}
