package h2

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
)

// FuzzFrameWatchAgreesWithTheFramer is the frame watch's differential test:
// whatever bytes the server sends, split into reads however the socket
// returns them, the watch reports the same MAX_CONCURRENT_STREAMS values, in
// the same order, as x/net's own Framer reads from the same bytes, up to the
// first frame the Framer refuses (where the engine would end the connection,
// and the watch's view no longer matters). When a SETTINGS frame names the
// limit more than once the engine applies them in order, so the last counts.
func FuzzFrameWatchAgreesWithTheFramer(f *testing.F) {
	var seed bytes.Buffer
	fr := http2.NewFramer(&seed, nil)
	fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 100},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	fr.WriteSettingsAck()
	fr.WriteData(1, false, bytes.Repeat([]byte("x"), 300))
	fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1})
	fr.WritePing(false, [8]byte{1})
	fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 0},
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 7})
	fr.WriteRSTStream(3, http2.ErrCodeRefusedStream)
	fr.WriteSettings()
	fr.WriteGoAway(5, http2.ErrCodeNo, []byte("bye"))
	f.Add(seed.Bytes(), []byte{1, 9, 2, 200, 3})
	f.Add(seed.Bytes(), []byte{255})
	f.Add([]byte{0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 5}, []byte{4, 4, 4})
	f.Fuzz(func(t *testing.T, stream, splits []byte) {
		var want []uint32
		rd := http2.NewFramer(nil, bytes.NewReader(stream))
		rd.SetMaxReadFrameSize(1<<24 - 1) // the watch has no size limit: compare every frame
		consumed := 0
		for {
			frame, err := rd.ReadFrame()
			if err != nil {
				break
			}
			consumed += frameHeaderLen + int(frame.Header().Length)
			if s, ok := frame.(*http2.SettingsFrame); ok && !s.IsAck() {
				var last uint32
				named := false
				s.ForeachSetting(func(st http2.Setting) error {
					if st.ID == http2.SettingMaxConcurrentStreams {
						last, named = st.Val, true
					}
					return nil
				})
				if named {
					want = append(want, last)
				}
			}
		}
		var got []uint32
		var w frameWatch
		p := stream[:consumed]
		for i := 0; len(p) > 0; i++ {
			n := len(p)
			if len(splits) > 0 {
				n = min(n, int(splits[i%len(splits)])+1)
			}
			w.feed(p[:n], func(v uint32) bool { got = append(got, v); return true })
			p = p[n:]
		}
		if len(got) != len(want) {
			t.Fatalf("the watch saw limits %v, the Framer %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("the watch saw limits %v, the Framer %v", got, want)
			}
		}
	})
}
