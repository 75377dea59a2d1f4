package protocol

import (
	"errors"
	"reflect"
	"testing"
	"time"
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
	} {
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, m := range codecSamples {
		f.Add(Encode(m))
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
