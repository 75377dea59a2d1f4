package h2

import "encoding/binary"

// A server may change SETTINGS_MAX_CONCURRENT_STREAMS at any time (RFC 9113
// section 6.5.2), and the engine applies the change without telling anyone:
// x/net has no hook for it, and its State takes the engine's write lock,
// which the read loop must never wait for (a write blocked on a peer that
// does not read would then stop the reads that could unblock it). So the
// Conn follows the frames the engine reads, on the socket under it, and
// keeps the limit of the last SETTINGS frame that named one. Missing a
// change would leave the Conn offering streams the engine no longer has:
// strict about slots, the engine would hold each such stream until its
// context ended, instead of the owner opening another connection.
//
// The Conn's limit never runs ahead of the engine's, so that a stream it
// grants is one the engine sends at once: a lower limit is taken as soon as
// its frame is read (before the engine applies it), a higher one only at the
// socket's next read, which the engine's read loop makes once it has
// handled every frame that came before (bufio reads the socket only when
// its buffer is empty). A limit raised early would be worse than late: the
// engine does not wake the streams waiting for a slot when the limit rises.
//
// The first SETTINGS frame that names no limit leaves the engine's default
// in place; the SETTINGS probe reads that one from the engine (refresh).

// frameWatch follows the frame boundaries of what the engine reads, and the
// SETTINGS frames' MAX_CONCURRENT_STREAMS. It is used by the engine's read
// loop only (socket.Read), so it needs no lock. A frame costs a few
// comparisons; DATA payloads are skipped, not scanned.
type frameWatch struct {
	hdr     [frameHeaderLen]byte
	nhdr    int    // bytes of the current frame's header read so far
	left    uint32 // bytes of the current frame's payload still to come
	inSet   bool   // the current frame is a SETTINGS frame (not an ACK) the engine will accept
	entry   [settingLen]byte
	nentry  int
	max     uint32 // MAX_CONCURRENT_STREAMS named by the current frame
	sawMax  bool
	pending bool // a raised limit, taken at the next read
	raised  uint32
}

const (
	frameHeaderLen = 9 // RFC 9113 section 4.1
	settingLen     = 6 // RFC 9113 section 6.5.1
	frameSettings  = 0x4
	flagAck        = 0x1
)

// next is called before each read of the socket: every frame read before has
// been handled by the engine. It returns a raised limit to take now.
func (w *frameWatch) next() (uint32, bool) {
	if !w.pending {
		return 0, false
	}
	w.pending = false
	return w.raised, true
}

// feed follows p, the bytes a read returned. For each SETTINGS frame that
// names a limit it calls take, which applies the limit at once and reports
// true when it is no higher than the Conn's; a higher one waits for next.
func (w *frameWatch) feed(p []byte, take func(uint32) bool) {
	for len(p) > 0 {
		if w.nhdr < frameHeaderLen {
			n := copy(w.hdr[w.nhdr:], p)
			w.nhdr += n
			p = p[n:]
			if w.nhdr < frameHeaderLen {
				return
			}
			length := uint32(w.hdr[0])<<16 | uint32(w.hdr[1])<<8 | uint32(w.hdr[2])
			stream := binary.BigEndian.Uint32(w.hdr[5:]) & (1<<31 - 1)
			w.left = length
			w.inSet = w.hdr[3] == frameSettings && w.hdr[4]&flagAck == 0 && stream == 0 && length%settingLen == 0
			w.nentry, w.sawMax = 0, false
		}
		n := min(uint32(len(p)), w.left)
		if w.inSet {
			w.settings(p[:n])
		}
		p, w.left = p[n:], w.left-n
		if w.left == 0 {
			w.endFrame(take)
		}
	}
}

// settings reads the entries of a SETTINGS payload, in pieces as they come.
func (w *frameWatch) settings(p []byte) {
	for len(p) > 0 {
		n := copy(w.entry[w.nentry:], p)
		w.nentry += n
		p = p[n:]
		if w.nentry < settingLen {
			return
		}
		w.nentry = 0
		if binary.BigEndian.Uint16(w.entry[:2]) == 0x3 { // SETTINGS_MAX_CONCURRENT_STREAMS
			w.max, w.sawMax = binary.BigEndian.Uint32(w.entry[2:]), true
		}
	}
}

// endFrame ends the current frame: a SETTINGS frame that named a limit
// lowers the Conn's at once, or raises it at the next read.
func (w *frameWatch) endFrame(take func(uint32) bool) {
	w.nhdr = 0
	if !w.inSet || !w.sawMax {
		return
	}
	if take(w.max) {
		w.pending = false // a raise read earlier is overtaken
		return
	}
	w.pending, w.raised = true, w.max
}
