package h2

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"testing"

	"golang.org/x/net/http2"
)

// A server may lower (and raise) SETTINGS_MAX_CONCURRENT_STREAMS at any time
// (RFC 9113 section 6.5.2). Lowered to 0 on an idle connection, the
// connection must say so (StreamsChanged, no stream available) and turn a
// new stream away at once as not sent, so that its owner opens another
// connection; the engine, strict about slots, would otherwise hold the
// stream until its context ends. Raised again, the streams come back.
func TestAStreamLimitLoweredAndRaisedAfterwardsIsReportedAndHonoured(t *testing.T) {
	lowered, raise, raised := make(chan bool, 1), make(chan struct{}), make(chan bool, 1)
	addr := startFake(t, func(f *fakeConn) {
		id, _ := f.request()
		if id == 0 {
			return
		}
		f.respond(id, 200, "one")
		lowered <- f.setLimit(0)
		<-raise
		raised <- f.setLimit(5)
		if id, _ := f.request(); id != 0 {
			f.respond(id, 200, "two")
		}
	})
	rec := newRecorder()
	c := newConn(t, dialFake(t, addr), Options{}, rec)
	if status, body, err := get(t, c, "http://"+addr+"/"); err != nil || status != 200 || body != "one" {
		t.Fatalf("first request: %d %q %v", status, body, err)
	}
	if !waitFor(t, lowered, "the client's SETTINGS ACK") {
		t.Fatal("the connection ended before the client acknowledged the lowered limit")
	}
	waitForLimit(t, rec, 0)
	if s := c.Streams(); s.Limit != 0 || s.Available != 0 || !s.Settings {
		t.Errorf("after the server lowered its limit to 0: %+v", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	_, err := c.RoundTrip(req, nil)
	assertNotSent(t, err, ErrNoStream)
	if ctx.Err() != nil {
		t.Errorf("the stream waited for its context to end: %v", err)
	}

	close(raise)
	if !waitFor(t, raised, "the client's SETTINGS ACK") {
		t.Fatal("the connection ended before the client acknowledged the raised limit")
	}
	waitForLimit(t, rec, 5)
	if status, body, err := get(t, c, "http://"+addr+"/"); err != nil || status != 200 || body != "two" {
		t.Errorf("after the limit was raised: %d %q %v", status, body, err)
	}
}

// waitForLimit waits for a StreamsChanged event reporting limit.
func waitForLimit(t *testing.T, rec *recorder, limit int) {
	t.Helper()
	for {
		if s := waitFor(t, rec.streams, "StreamsChanged"); s.Limit == limit {
			return
		}
	}
}

// frames is the bytes of the frames write writes.
func frames(t *testing.T, write func(fr *http2.Framer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := write(http2.NewFramer(&b, nil)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestFrameWatchFollowsTheLimitsOfSettingsFramesHoweverTheReadsSplitThem(t *testing.T) {
	mcs := func(n uint32) http2.Setting { return http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: n} }
	window := http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}
	const current = 100 // the Conn's limit
	cases := []struct {
		name  string
		write func(fr *http2.Framer) error
		want  []uint32 // the limits taken, in order, however the reads are split
	}{
		{name: "a lower limit among other settings",
			write: func(fr *http2.Framer) error { return fr.WriteSettings(window, mcs(4)) },
			want:  []uint32{4}},
		{name: "a higher limit",
			write: func(fr *http2.Framer) error { return fr.WriteSettings(mcs(250)) },
			want:  []uint32{250}},
		{name: "the same limit (the SETTINGS are known)",
			write: func(fr *http2.Framer) error { return fr.WriteSettings(mcs(100)) },
			want:  []uint32{100}},
		{name: "a frame's last limit counts",
			write: func(fr *http2.Framer) error { return fr.WriteSettings(mcs(1), mcs(0)) },
			want:  []uint32{0}},
		{name: "settings without a limit, an ACK and other frames are skipped",
			write: func(fr *http2.Framer) error {
				fr.WriteData(1, false, bytes.Repeat([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0}, 100)) // looks like SETTINGS inside
				fr.WriteSettingsAck()
				fr.WritePing(false, [8]byte{})
				return fr.WriteSettings(window)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := frames(t, tc.write)
			for _, size := range []int{1, 2, 5, 9, 10, 64, len(b)} {
				var w frameWatch
				var taken []uint32
				reads := 0
				take := func(v uint32) bool {
					if v > current {
						return false // a raise: not before the engine has it
					}
					taken = append(taken, v)
					return true
				}
				for p := b; len(p) >= 0; reads++ {
					if v, ok := w.next(); ok {
						if reads == 0 {
							t.Fatal("a raise before any read")
						}
						taken = append(taken, v)
					}
					if len(p) == 0 {
						break
					}
					n := min(size, len(p))
					w.feed(p[:n], take)
					p = p[n:]
				}
				if !slices.Equal(taken, tc.want) {
					t.Errorf("reads of %d bytes: took %v, want %v", size, taken, tc.want)
				}
			}
		})
	}
}

// A raise read and a lower limit read after it, before the engine read
// again, leave the lower one: the raise is overtaken, never taken late.
func TestFrameWatchLetsALowerLimitOvertakeARaiseNotYetTaken(t *testing.T) {
	b := frames(t, func(fr *http2.Framer) error {
		fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 500})
		return fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 2})
	})
	var w frameWatch
	var taken []uint32
	w.feed(b, func(v uint32) bool {
		if v > 100 {
			return false
		}
		taken = append(taken, v)
		return true
	})
	if v, ok := w.next(); ok {
		t.Errorf("the overtaken raise to %d was taken", v)
	}
	if !slices.Equal(taken, []uint32{2}) {
		t.Errorf("took %v, want [2]", taken)
	}
}
