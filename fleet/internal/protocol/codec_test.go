package protocol

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

var codecSamples = []any{
	Renew{Node: "127.0.0.1:8090/fleet-keeper$1", Seq: 7, Budget: 12, FloorCap: -1, Release: true,
		Entries: []Entry{{Route: "http://10.0.0.1:80", Has: 3, Held: 2, Need: 5, Want: 6, OnFloor: 1}, {Route: "https://a.example:443"}}},
	RenewReply{Host: "127.0.0.1:8090", Seq: 7, Lease: 3 * time.Second, Vouch: time.Second, Eager: true,
		Grants: []Grant{{Status: StatusOK, Grant: 4, Budget: 12, Floor: 4, Epoch: 9, Safe: true, Nodes: 3, RetryAfter: 375 * time.Millisecond},
			{Status: StatusNotOwner, Owner: "127.0.0.1:8091"}}},
	RenewReply{Host: "h", Seq: 1, Stale: true},
	Nudge{Host: "127.0.0.1:8090"},
	Handoff{From: "h0", Shard: 17, Epoch: 3, ToSession: 7, Ledgers: []LedgerState{{Route: "http://10.0.0.1:80",
		Holders: []HolderState{{Node: "n1", Budget: 12, Has: 4, Held: 4, Need: 6, Want: 7, Grant: 4, Floor: 4, ExpiresIn: 2 * time.Second}, {Node: "n2", Lapsed: true, Floor: 4, Vouched: 2, VouchedFor: time.Second}}}}},
	HandoffAck{From: "h1", Shard: 17, Epoch: 3},
}

func TestCodecRoundTripsEveryMessage(t *testing.T) {
	for _, m := range codecSamples {
		got, err := Decode(Encode(m))
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%T: got %+v, want %+v", m, got, m)
		}
	}
}

func TestCodecRefusesMalformedMessages(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":           nil,
		"unknown type":    {99},
		"truncated":       Encode(codecSamples[0])[:9],
		"no node":         Encode(Renew{Seq: 1, Budget: 1}),
		"no budget":       Encode(Renew{Node: "n", Seq: 1}),
		"bad status":      Encode(RenewReply{Host: "h", Grants: []Grant{{Status: 9}}}),
		"fixed64 field":   {tagNudge, 0x09, 1, 2, 3, 4, 5, 6, 7, 8},
		"no handoff from": Encode(Handoff{Epoch: 1}),
		"holder without budget": Encode(Handoff{From: "h0", Epoch: 1, Ledgers: []LedgerState{{Route: "r",
			Holders: []HolderState{{Node: "n1", Need: 1}}}}}),
		"holder without node": Encode(Handoff{From: "h0", Epoch: 1, Ledgers: []LedgerState{{Route: "r",
			Holders: []HolderState{{Budget: 4, Need: 1}}}}}),
		"ledger without route": Encode(Handoff{From: "h0", Epoch: 1, Ledgers: []LedgerState{{
			Holders: []HolderState{{Node: "n1", Budget: 4, Need: 1}}}}}),
	} {
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// wrongTypes are well-formed messages but for one known field written with
// the other wire type (bytes for a number, a number for bytes), which a
// decoder that does not check would read as zero.
var wrongTypes = map[string][]byte{
	"renew floor cap as bytes":   str(Encode(Renew{Node: "n", Seq: 1, Budget: 4, FloorCap: 2}), 4, "x"),
	"renew release as bytes":     str(Encode(Renew{Node: "n", Seq: 1, Budget: 4}), 5, "x"),
	"entry has as bytes":         embed(Encode(Renew{Node: "n", Seq: 1, Budget: 4}), 6, str(str(nil, 1, "r"), 2, "x")),
	"entry route as a number":    embed(Encode(Renew{Node: "n", Seq: 1, Budget: 4}), 6, num(str(nil, 1, "r"), 1, 1)),
	"reply lease as bytes":       str(Encode(RenewReply{Host: "h", Seq: 1}), 4, "x"),
	"reply grant as a number":    num(Encode(RenewReply{Host: "h", Seq: 1}), 7, 1),
	"grant epoch as bytes":       embed(Encode(RenewReply{Host: "h", Seq: 1}), 7, str(nil, 5, "x")),
	"nudge host as a number":     num(Encode(Nudge{Host: "h"}), 1, 1),
	"handoff session as bytes":   str(Encode(Handoff{From: "h0", Shard: 1, Epoch: 2, ToSession: 3}), 5, "x"),
	"handoff ledger as a number": num(Encode(Handoff{From: "h0", Shard: 1, Epoch: 2}), 4, 1),
	"holder has as bytes": embed(Encode(Handoff{From: "h0", Shard: 1, Epoch: 2}), 4,
		embed(str(nil, 1, "r"), 2, str(sint(str(nil, 1, "n1"), 2, 4), 3, "x"))),
	"ack epoch as bytes": str(Encode(HandoffAck{From: "h1", Shard: 1, Epoch: 2}), 3, "x"),
}

// embed appends the embedded message inner to b as field n.
func embed(b []byte, n protowire.Number, inner []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, n, protowire.BytesType), inner)
}

func TestCodecRefusesAKnownFieldOfTheWrongWireType(t *testing.T) {
	for name, b := range wrongTypes {
		m, err := Decode(b)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "wire type") {
			t.Errorf("%s: decoded %+v, %v; want ErrMalformed naming the wire type", name, m, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, m := range codecSamples {
		f.Add(Encode(m))
	}
	for _, b := range wrongTypes {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		// What decodes encodes back to something that decodes the same.
		again, err := Decode(Encode(m))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("%+v did not survive a round trip: %+v, %v", m, again, err)
		}
	})
}
