package protocol

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// The messages cross the cluster in protobuf's wire format, written and read
// with protowire (no generated code): a message is one byte naming its type,
// then its fields. Decoding checks every field, its wire type included: a
// message from another version, or a bug, is refused with ErrMalformed,
// never half read.

// ErrMalformed is returned (wrapped) by Decode for bytes that are not a
// well-formed fleet message.
var ErrMalformed = errors.New("malformed fleet message")

const (
	tagRenew byte = iota + 1
	tagRenewReply
	tagNudge
	tagHandoff
	tagHandoffAck
)

// Encode returns msg's bytes; msg is a Renew, RenewReply, Nudge, Handoff or
// HandoffAck (a value, not a pointer). Anything else panics: it is a bug.
func Encode(msg any) []byte {
	switch m := msg.(type) {
	case Renew:
		b := []byte{tagRenew}
		b = str(b, 1, string(m.Node))
		b = num(b, 2, m.Seq)
		b = sint(b, 3, m.Budget)
		b = sint(b, 4, m.FloorCap)
		b = boolean(b, 5, m.Release)
		return each(b, 6, m.Entries, appendEntry)
	case RenewReply:
		b := []byte{tagRenewReply}
		b = str(b, 1, string(m.Host))
		b = num(b, 2, m.Seq)
		b = boolean(b, 3, m.Stale)
		b = dur(b, 4, m.Lease)
		b = dur(b, 5, m.Vouch)
		b = boolean(b, 6, m.Eager)
		return each(b, 7, m.Grants, appendGrant)
	case Nudge:
		return str([]byte{tagNudge}, 1, string(m.Host))
	case Handoff:
		b := appendShard([]byte{tagHandoff}, m.From, m.Shard, m.Epoch)
		b = num(b, 5, uint64(m.ToSession))
		return each(b, 4, m.Ledgers, appendLedger)
	case HandoffAck:
		return appendShard([]byte{tagHandoffAck}, m.From, m.Shard, m.Epoch)
	}
	panic(fmt.Sprintf("protocol: internal error: Encode of a %T", msg))
}

// each writes items as embedded messages, each a field n written by enc.
func each[T any](b []byte, n protowire.Number, items []T, enc func([]byte, T) []byte) []byte {
	for _, it := range items {
		b = protowire.AppendTag(b, n, protowire.BytesType)
		b = protowire.AppendBytes(b, enc(nil, it))
	}
	return b
}

func appendEntry(b []byte, e Entry) []byte {
	b = str(b, 1, e.Route)
	b = sint(b, 2, e.Has)
	b = sint(b, 3, e.Held)
	b = sint(b, 4, e.Need)
	b = sint(b, 5, e.Want)
	return sint(b, 6, e.OnFloor)
}

func appendGrant(b []byte, g Grant) []byte {
	b = num(b, 1, uint64(g.Status))
	b = sint(b, 2, g.Grant)
	b = sint(b, 3, g.Budget)
	b = sint(b, 4, g.Floor)
	b = num(b, 5, g.Epoch)
	b = boolean(b, 6, g.Safe)
	b = sint(b, 7, g.Nodes)
	b = dur(b, 8, g.RetryAfter)
	return str(b, 9, string(g.Owner))
}

func appendLedger(b []byte, l LedgerState) []byte {
	return each(str(b, 1, l.Route), 2, l.Holders, appendHolder)
}

func appendHolder(b []byte, h HolderState) []byte {
	b = str(b, 1, string(h.Node))
	b = sint(b, 2, h.Budget)
	b = sint(b, 3, h.Has)
	b = sint(b, 4, h.Held)
	b = sint(b, 5, h.Need)
	b = sint(b, 6, h.Want)
	b = sint(b, 7, h.OnFloor)
	b = sint(b, 8, h.Grant)
	b = sint(b, 9, h.Floor)
	b = boolean(b, 10, h.Lapsed)
	b = dur(b, 11, h.ExpiresIn)
	b = sint(b, 12, h.Vouched)
	return dur(b, 13, h.VouchedFor)
}

// appendShard writes the fields 1 to 3 that a Handoff and a HandoffAck
// share: the sender, the shard and its epoch.
func appendShard(b []byte, from HostID, shard int, epoch uint64) []byte {
	b = str(b, 1, string(from))
	b = sint(b, 2, shard)
	return num(b, 3, epoch)
}

// shardField reads one of those fields, and reports whether it was one.
func shardField(n protowire.Number, f field, from *HostID, shard *int, epoch *uint64) bool {
	switch n {
	case 1:
		*from = HostID(f.str())
	case 2:
		*shard = f.int()
	case 3:
		*epoch = f.v
	default:
		return false
	}
	return true
}

func str(b []byte, n protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func num(b []byte, n protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func sint(b []byte, n protowire.Number, v int) []byte {
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, protowire.EncodeZigZag(int64(v)))
}

func dur(b []byte, n protowire.Number, d time.Duration) []byte { return sint(b, n, int(d)) }

func boolean(b []byte, n protowire.Number, v bool) []byte {
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, protowire.EncodeBool(v))
}

// Decode reads a message Encode wrote: a Renew, RenewReply, Nudge, Handoff
// or HandoffAck value.
func Decode(b []byte) (any, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrMalformed)
	}
	body := b[1:]
	switch b[0] {
	case tagRenew:
		var m Renew
		err := fields(body, renewWire, func(n protowire.Number, f field) error {
			switch n {
			case 1:
				m.Node = NodeID(f.str())
			case 2:
				m.Seq = f.v
			case 3:
				m.Budget = f.int()
			case 4:
				m.FloorCap = f.int()
			case 5:
				m.Release = f.v != 0
			case 6:
				e, err := embedded(f.b, entryWire, setEntry)
				if err != nil {
					return err
				}
				if e.Route == "" {
					return fmt.Errorf("%w: an entry without a route", ErrMalformed)
				}
				m.Entries = append(m.Entries, e)
			}
			return nil
		})
		if err == nil && (m.Node == "" || m.Seq == 0 || m.Budget <= 0) {
			err = fmt.Errorf("%w: a renewal without node, sequence number or budget", ErrMalformed)
		}
		return m, err
	case tagRenewReply:
		var m RenewReply
		err := fields(body, replyWire, func(n protowire.Number, f field) error {
			switch n {
			case 1:
				m.Host = HostID(f.str())
			case 2:
				m.Seq = f.v
			case 3:
				m.Stale = f.v != 0
			case 4:
				m.Lease = time.Duration(f.int())
			case 5:
				m.Vouch = time.Duration(f.int())
			case 6:
				m.Eager = f.v != 0
			case 7:
				g, err := embedded(f.b, grantWire, setGrant)
				if err != nil {
					return err
				}
				if g.Status > StatusFenced || g.Grant < 0 {
					return fmt.Errorf("%w: a grant of status %d, %d connections", ErrMalformed, g.Status, g.Grant)
				}
				m.Grants = append(m.Grants, g)
			}
			return nil
		})
		if err == nil && m.Host == "" {
			err = fmt.Errorf("%w: a reply without host", ErrMalformed)
		}
		return m, err
	case tagNudge:
		var m Nudge
		err := fields(body, nudgeWire, func(n protowire.Number, f field) error {
			if n == 1 {
				m.Host = HostID(f.str())
			}
			return nil
		})
		if err == nil && m.Host == "" {
			err = fmt.Errorf("%w: a nudge without host", ErrMalformed)
		}
		return m, err
	case tagHandoff:
		var m Handoff
		err := fields(body, handoffWire, func(n protowire.Number, f field) error {
			switch {
			case shardField(n, f, &m.From, &m.Shard, &m.Epoch):
			case n == 5:
				m.ToSession = int64(f.v)
			case n == 4:
				l, err := embedded(f.b, ledgerWire, setLedger)
				if err != nil {
					return err
				}
				if l.Route == "" {
					// Installed, it would be a ledger no renewal ever reaches.
					return fmt.Errorf("%w: a ledger without a route", ErrMalformed)
				}
				m.Ledgers = append(m.Ledgers, l)
			}
			return nil
		})
		if err == nil && (m.From == "" || m.Epoch == 0 || m.Shard < 0) {
			err = fmt.Errorf("%w: a handoff without sender, epoch or shard", ErrMalformed)
		}
		return m, err
	case tagHandoffAck:
		var m HandoffAck
		err := fields(body, ackWire, func(n protowire.Number, f field) error {
			shardField(n, f, &m.From, &m.Shard, &m.Epoch)
			return nil
		})
		if err == nil && m.From == "" {
			err = fmt.Errorf("%w: an acknowledgement without sender", ErrMalformed)
		}
		return m, err
	}
	return nil, fmt.Errorf("%w: unknown type %d", ErrMalformed, b[0])
}

// embedded reads an embedded message of the wire types wire: each of b's
// fields goes to set.
func embedded[T any](b []byte, wire wireTypes, set func(*T, protowire.Number, field) error) (T, error) {
	var v T
	err := fields(b, wire, func(n protowire.Number, f field) error { return set(&v, n, f) })
	return v, err
}

func setEntry(e *Entry, n protowire.Number, f field) error {
	switch n {
	case 1:
		e.Route = f.str()
	case 2:
		e.Has = f.int()
	case 3:
		e.Held = f.int()
	case 4:
		e.Need = f.int()
	case 5:
		e.Want = f.int()
	case 6:
		e.OnFloor = f.int()
	}
	return nil
}

func setGrant(g *Grant, n protowire.Number, f field) error {
	switch n {
	case 1:
		g.Status = Status(f.v)
	case 2:
		g.Grant = f.int()
	case 3:
		g.Budget = f.int()
	case 4:
		g.Floor = f.int()
	case 5:
		g.Epoch = f.v
	case 6:
		g.Safe = f.v != 0
	case 7:
		g.Nodes = f.int()
	case 8:
		g.RetryAfter = time.Duration(f.int())
	case 9:
		g.Owner = HostID(f.str())
	}
	return nil
}

func setLedger(l *LedgerState, n protowire.Number, f field) error {
	switch n {
	case 1:
		l.Route = f.str()
	case 2:
		h, err := embedded(f.b, holderWire, setHolder)
		if err != nil {
			return err
		}
		if h.Node == "" || !h.Lapsed && h.Budget <= 0 {
			// A live holder's budget is one the ledger divides by.
			return fmt.Errorf("%w: a holder without node, or live without budget", ErrMalformed)
		}
		l.Holders = append(l.Holders, h)
	}
	return nil
}

func setHolder(h *HolderState, n protowire.Number, f field) error {
	switch n {
	case 1:
		h.Node = NodeID(f.str())
	case 2:
		h.Budget = f.int()
	case 3:
		h.Has = f.int()
	case 4:
		h.Held = f.int()
	case 5:
		h.Need = f.int()
	case 6:
		h.Want = f.int()
	case 7:
		h.OnFloor = f.int()
	case 8:
		h.Grant = f.int()
	case 9:
		h.Floor = f.int()
	case 10:
		h.Lapsed = f.v != 0
	case 11:
		h.ExpiresIn = time.Duration(f.int())
	case 12:
		h.Vouched = f.int()
	case 13:
		h.VouchedFor = time.Duration(f.int())
	}
	return nil
}

// field is one field as read: v for a varint, b for bytes.
type field struct {
	v uint64
	b []byte
}

func (f field) str() string { return string(f.b) }
func (f field) int() int    { return int(protowire.DecodeZigZag(f.v)) }

// wireType is the wire type a message's field is written with: wire[n] for
// field n, the fields Encode writes.
type wireType uint8

const (
	unknownField wireType = iota // a number this version does not write
	varintField
	bytesField
)

func (w wireType) String() string {
	if w == bytesField {
		return "bytes"
	}
	return "varint"
}

// wireTypes lists the wire type of each field of a message, by number.
type wireTypes []wireType

// The wire types of each message's fields, as Encode writes them.
var (
	renewWire = wireTypes{1: bytesField, 2: varintField, 3: varintField, 4: varintField, 5: varintField, 6: bytesField}
	entryWire = wireTypes{1: bytesField, 2: varintField, 3: varintField, 4: varintField, 5: varintField, 6: varintField}
	replyWire = wireTypes{1: bytesField, 2: varintField, 3: varintField, 4: varintField, 5: varintField, 6: varintField, 7: bytesField}
	grantWire = wireTypes{1: varintField, 2: varintField, 3: varintField, 4: varintField, 5: varintField,
		6: varintField, 7: varintField, 8: varintField, 9: bytesField}
	nudgeWire   = wireTypes{1: bytesField}
	handoffWire = wireTypes{1: bytesField, 2: varintField, 3: varintField, 4: bytesField, 5: varintField}
	ackWire     = wireTypes{1: bytesField, 2: varintField, 3: varintField}
	ledgerWire  = wireTypes{1: bytesField, 2: bytesField}
	holderWire  = wireTypes{1: bytesField, 2: varintField, 3: varintField, 4: varintField, 5: varintField,
		6: varintField, 7: varintField, 8: varintField, 9: varintField, 10: varintField, 11: varintField,
		12: varintField, 13: varintField}
)

// fields reads b's fields in order and hands each to each; a field of a
// number wire does not list is skipped (a newer version's), one of a wire
// type other than varint or bytes is refused, and so is a known field of
// the other one (read as the type it is not, it would be taken for zero).
func fields(b []byte, wire wireTypes, each func(protowire.Number, field) error) error {
	for len(b) > 0 {
		n, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(k))
		}
		b = b[k:]
		var f field
		switch typ {
		case protowire.VarintType:
			f.v, k = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.b, k = protowire.ConsumeBytes(b)
		default:
			return fmt.Errorf("%w: field %d of wire type %d", ErrMalformed, n, typ)
		}
		if k < 0 {
			return fmt.Errorf("%w: field %d: %v", ErrMalformed, n, protowire.ParseError(k))
		}
		if n < protowire.Number(len(wire)) && wire[n] != unknownField && (typ == protowire.BytesType) != (wire[n] == bytesField) {
			return fmt.Errorf("%w: field %d of wire type %d, want %v", ErrMalformed, n, typ, wire[n])
		}
		b = b[k:]
		if err := each(n, f); err != nil {
			return err
		}
	}
	return nil
}
