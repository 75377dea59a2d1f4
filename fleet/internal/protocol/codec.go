package protocol

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/connactor/connactor/fleet/internal/protocol/fleetpb"
)

// The messages cross the cluster as the generated protobuf messages of
// package fleetpb (fleetpb/fleet.proto), which protoactor's remote
// serializes itself; protobuf reads the bytes, skips unknown fields and
// refuses malformed ones. Encode and Decode convert at the edge, so that the
// protocol's logic keeps plain values (ints, durations, typed IDs, structs
// copied by value), and Decode refuses what protobuf cannot see: a message
// without the fields it must have, a status it does not know, a negative
// count or duration.

// ErrMalformed is returned (wrapped) by Decode for a message that is not a
// well-formed fleet message.
var ErrMalformed = errors.New("malformed fleet message")

// Encode returns msg as the protobuf message that crosses the cluster; msg is
// a Renew, RenewReply, Nudge, Handoff or HandoffAck (a value, not a pointer).
// Anything else panics: it is a bug. The result shares nothing with msg, and
// is not to be changed once sent (protoactor's remote marshals it later, on
// its own goroutine).
func Encode(msg any) proto.Message {
	switch m := msg.(type) {
	case Renew:
		return &fleetpb.Renew{Node: string(m.Node), Seq: m.Seq, Budget: int64(m.Budget), FloorCap: int64(m.FloorCap),
			Release: m.Release, Entries: encodeEach(m.Entries, func(e Entry) *fleetpb.Entry {
				return &fleetpb.Entry{Route: e.Route, Has: int64(e.Has), Held: int64(e.Held), Need: int64(e.Need),
					Want: int64(e.Want), OnFloor: int64(e.OnFloor)}
			})}
	case RenewReply:
		return &fleetpb.RenewReply{Host: string(m.Host), Seq: m.Seq, Stale: m.Stale, LeaseNanos: int64(m.Lease),
			VouchNanos: int64(m.Vouch), Eager: m.Eager, Grants: encodeEach(m.Grants, func(g Grant) *fleetpb.Grant {
				return &fleetpb.Grant{Status: fleetpb.Status(g.Status), Grant: int64(g.Grant), Budget: int64(g.Budget),
					Floor: int64(g.Floor), Epoch: g.Epoch, Safe: g.Safe, Nodes: int64(g.Nodes),
					RetryAfterNanos: int64(g.RetryAfter), Owner: string(g.Owner)}
			})}
	case Nudge:
		return &fleetpb.Nudge{Host: string(m.Host)}
	case Handoff:
		return &fleetpb.Handoff{From: string(m.From), Shard: int64(m.Shard), Epoch: m.Epoch, ToSession: m.ToSession,
			Ledgers: encodeEach(m.Ledgers, func(l LedgerState) *fleetpb.LedgerState {
				return &fleetpb.LedgerState{Route: l.Route, Holders: encodeEach(l.Holders, encodeHolder)}
			})}
	case HandoffAck:
		return &fleetpb.HandoffAck{From: string(m.From), Shard: int64(m.Shard), Epoch: m.Epoch}
	}
	panic(fmt.Sprintf("protocol: internal error: Encode of a %T", msg))
}

func encodeHolder(h HolderState) *fleetpb.HolderState {
	return &fleetpb.HolderState{Node: string(h.Node), Budget: int64(h.Budget), Has: int64(h.Has), Held: int64(h.Held),
		Need: int64(h.Need), Want: int64(h.Want), OnFloor: int64(h.OnFloor), Grant: int64(h.Grant),
		Floor: int64(h.Floor), Lapsed: h.Lapsed, ExpiresInNanos: int64(h.ExpiresIn), Vouched: int64(h.Vouched),
		VouchedForNanos: int64(h.VouchedFor)}
}

func encodeEach[T, P any](items []T, enc func(T) P) []P {
	if len(items) == 0 {
		return nil
	}
	out := make([]P, len(items))
	for i, it := range items {
		out[i] = enc(it)
	}
	return out
}

// Decode returns the protocol message msg carries, a Renew, RenewReply,
// Nudge, Handoff or HandoffAck value, or an error wrapping ErrMalformed if
// msg is not a fleet message or one the protocol cannot act on. It does not
// change msg.
func Decode(msg proto.Message) (any, error) {
	switch p := msg.(type) {
	case *fleetpb.Renew:
		return decodeRenew(p)
	case *fleetpb.RenewReply:
		return decodeReply(p)
	case *fleetpb.Nudge:
		if p.GetHost() == "" {
			return nil, malformed("a nudge without host")
		}
		return Nudge{Host: HostID(p.GetHost())}, nil
	case *fleetpb.Handoff:
		return decodeHandoff(p)
	case *fleetpb.HandoffAck:
		m := HandoffAck{From: HostID(p.GetFrom()), Shard: int(p.GetShard()), Epoch: p.GetEpoch()}
		if m.From == "" || m.Shard < 0 {
			return nil, malformed("an acknowledgement without sender, or of a negative shard")
		}
		return m, nil
	}
	return nil, fmt.Errorf("%w: a %T", ErrMalformed, msg)
}

func decodeRenew(p *fleetpb.Renew) (any, error) {
	m := Renew{Node: NodeID(p.GetNode()), Seq: p.GetSeq(), Budget: int(p.GetBudget()), FloorCap: int(p.GetFloorCap()),
		Release: p.GetRelease()}
	if m.Node == "" || m.Seq == 0 || m.Budget <= 0 {
		return nil, malformed("a renewal without node, sequence number or budget")
	}
	var err error
	m.Entries, err = decodeEach(p.GetEntries(), func(e *fleetpb.Entry) (Entry, error) {
		if e.GetRoute() == "" || !counts(e.GetHas(), e.GetHeld(), e.GetNeed(), e.GetWant(), e.GetOnFloor()) {
			return Entry{}, malformed("an entry without route, or with a negative count")
		}
		return Entry{Route: e.GetRoute(), Has: int(e.GetHas()), Held: int(e.GetHeld()), Need: int(e.GetNeed()),
			Want: int(e.GetWant()), OnFloor: int(e.GetOnFloor())}, nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func decodeReply(p *fleetpb.RenewReply) (any, error) {
	m := RenewReply{Host: HostID(p.GetHost()), Seq: p.GetSeq(), Stale: p.GetStale(),
		Lease: time.Duration(p.GetLeaseNanos()), Vouch: time.Duration(p.GetVouchNanos()), Eager: p.GetEager()}
	if m.Host == "" || !counts(p.GetLeaseNanos(), p.GetVouchNanos()) {
		return nil, malformed("a reply without host, or with a negative lease or vouch")
	}
	var err error
	m.Grants, err = decodeEach(p.GetGrants(), func(g *fleetpb.Grant) (Grant, error) {
		s := g.GetStatus()
		if s < fleetpb.Status_STATUS_OK || s > fleetpb.Status_STATUS_FENCED ||
			!counts(g.GetGrant(), g.GetBudget(), g.GetFloor(), g.GetNodes(), g.GetRetryAfterNanos()) {
			return Grant{}, malformed(fmt.Sprintf("a grant of status %d, or with a negative count", s))
		}
		return Grant{Status: Status(s), Grant: int(g.GetGrant()), Budget: int(g.GetBudget()), Floor: int(g.GetFloor()),
			Epoch: g.GetEpoch(), Safe: g.GetSafe(), Nodes: int(g.GetNodes()),
			RetryAfter: time.Duration(g.GetRetryAfterNanos()), Owner: HostID(g.GetOwner())}, nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func decodeHandoff(p *fleetpb.Handoff) (any, error) {
	m := Handoff{From: HostID(p.GetFrom()), Shard: int(p.GetShard()), Epoch: p.GetEpoch(), ToSession: p.GetToSession()}
	if m.From == "" || m.Epoch == 0 || m.Shard < 0 {
		return nil, malformed("a handoff without sender, epoch or shard")
	}
	var err error
	m.Ledgers, err = decodeEach(p.GetLedgers(), func(l *fleetpb.LedgerState) (LedgerState, error) {
		if l.GetRoute() == "" {
			// Installed, it would be a ledger no renewal ever reaches.
			return LedgerState{}, malformed("a ledger without a route")
		}
		holders, err := decodeEach(l.GetHolders(), decodeHolder)
		return LedgerState{Route: l.GetRoute(), Holders: holders}, err
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func decodeHolder(h *fleetpb.HolderState) (HolderState, error) {
	// A live holder's budget is one the ledger divides by.
	if h.GetNode() == "" || !h.GetLapsed() && h.GetBudget() <= 0 {
		return HolderState{}, malformed("a holder without node, or live without budget")
	}
	if !counts(h.GetBudget(), h.GetHas(), h.GetHeld(), h.GetNeed(), h.GetWant(), h.GetOnFloor(), h.GetGrant(),
		h.GetFloor(), h.GetExpiresInNanos(), h.GetVouched(), h.GetVouchedForNanos()) {
		return HolderState{}, malformed("a holder with a negative count or duration")
	}
	return HolderState{Node: NodeID(h.GetNode()), Budget: int(h.GetBudget()), Has: int(h.GetHas()),
		Held: int(h.GetHeld()), Need: int(h.GetNeed()), Want: int(h.GetWant()), OnFloor: int(h.GetOnFloor()),
		Grant: int(h.GetGrant()), Floor: int(h.GetFloor()), Lapsed: h.GetLapsed(),
		ExpiresIn: time.Duration(h.GetExpiresInNanos()), Vouched: int(h.GetVouched()),
		VouchedFor: time.Duration(h.GetVouchedForNanos())}, nil
}

// decodeEach decodes items with dec, stopping at the first error; none
// decode to nil, as the protocol's values have them.
func decodeEach[P, T any](items []P, dec func(P) (T, error)) ([]T, error) {
	if len(items) == 0 {
		return nil, nil
	}
	out := make([]T, len(items))
	for i, it := range items {
		var err error
		if out[i], err = dec(it); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// counts reports whether none of vs is negative.
func counts(vs ...int64) bool {
	for _, v := range vs {
		if v < 0 {
			return false
		}
	}
	return true
}

func malformed(what string) error { return fmt.Errorf("%w: %s", ErrMalformed, what) }
