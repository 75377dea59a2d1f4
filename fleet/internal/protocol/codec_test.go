package protocol

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/connactor/connactor/fleet/internal/protocol/fleetpb"
)

// codecSamples between them set every field of every message (checked by
// TestCodecSamplesSetEveryField), so that a field Encode or Decode forgets
// fails the round trip.
var codecSamples = []any{
	Renew{Node: "127.0.0.1:8090/fleet-keeper$1", Seq: 7, Budget: 12, FloorCap: -1, Release: true,
		Entries: []Entry{{Route: "http://10.0.0.1:80", Has: 3, Held: 2, Need: 5, Want: 6, OnFloor: 1}, {Route: "https://a.example:443"}}},
	RenewReply{Host: "127.0.0.1:8090", Seq: 7, Lease: 3 * time.Second, Vouch: time.Second, Eager: true,
		Grants: []Grant{{Status: StatusOK, Grant: 4, Budget: 12, Floor: 4, Epoch: 9, Safe: true, Nodes: 3, RetryAfter: 375 * time.Millisecond},
			{Status: StatusNotOwner, Owner: "127.0.0.1:8091"}}},
	RenewReply{Host: "h", Seq: 1, Stale: true},
	Nudge{Host: "127.0.0.1:8090"},
	Handoff{From: "h0", Shard: 17, Epoch: 3, ToSession: 7, Ledgers: []LedgerState{{Route: "http://10.0.0.1:80",
		Holders: []HolderState{{Node: "n1", Budget: 12, Has: 4, Held: 4, Need: 6, Want: 7, OnFloor: 2, Grant: 4, Floor: 4, ExpiresIn: 2 * time.Second},
			{Node: "n2", Lapsed: true, Floor: 4, Vouched: 2, VouchedFor: time.Second}}}}},
	HandoffAck{From: "h1", Shard: 17, Epoch: 3},
}

// crossCluster sends m the way protoactor's remote does between members:
// marshalled with the message's full name, and found again by that name.
func crossCluster(t *testing.T, m proto.Message) proto.Message {
	t.Helper()
	b, typeName, err := remote.Serialize(m, remote.DefaultSerializerID)
	if err != nil {
		t.Fatalf("%T: serialize: %v", m, err)
	}
	got, err := remote.Deserialize(b, typeName, remote.DefaultSerializerID)
	if err != nil {
		t.Fatalf("%T: deserialize: %v", m, err)
	}
	return got.(proto.Message)
}

func TestCodecRoundTripsEveryMessageAcrossTheCluster(t *testing.T) {
	for _, m := range codecSamples {
		got, err := Decode(crossCluster(t, Encode(m)))
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%T: got %+v, want %+v", m, got, m)
		}
	}
}

// TestCodecSamplesSetEveryField checks that each of the protocol's messages
// (and the structs inside them) has a protobuf message of the same name with
// as many fields, and that the samples set every field at least once.
func TestCodecSamplesSetEveryField(t *testing.T) {
	set := map[reflect.Type]map[string]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Struct:
			if set[v.Type()] == nil {
				set[v.Type()] = map[string]bool{}
			}
			for i := range v.NumField() {
				if !v.Field(i).IsZero() {
					set[v.Type()][v.Type().Field(i).Name] = true
				}
				walk(v.Field(i))
			}
		}
	}
	for _, m := range codecSamples {
		walk(reflect.ValueOf(m))
	}
	if len(set) != 9 {
		t.Errorf("the samples hold %d struct types, want the 9 of the messages", len(set))
	}
	for typ, fields := range set {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName("connactor.fleet." + typ.Name()))
		if err != nil {
			t.Errorf("%v: no protobuf message of its name: %v", typ, err)
		} else if n := mt.Descriptor().Fields().Len(); n != typ.NumField() {
			t.Errorf("%v has %d fields, its protobuf message %d", typ, typ.NumField(), n)
		}
		for i := range typ.NumField() {
			if name := typ.Field(i).Name; !fields[name] {
				t.Errorf("no sample sets %v.%s", typ, name)
			}
		}
	}
}

func TestCodecStatusesAreTheProtobufEnums(t *testing.T) {
	want := map[Status]string{StatusOK: "STATUS_OK", StatusNotOwner: "STATUS_NOT_OWNER", StatusMoving: "STATUS_MOVING",
		StatusFenced: "STATUS_FENCED"}
	for s, name := range want {
		if got := fleetpb.Status(s).String(); got != name {
			t.Errorf("Status %d is %s in protobuf, want %s", s, got, name)
		}
	}
	if n := fleetpb.Status(0).Descriptor().Values().Len(); n != len(want) {
		t.Errorf("protobuf has %d statuses, the protocol %d", n, len(want))
	}
}

func TestCodecRefusesBytesProtobufCannotRead(t *testing.T) {
	renew, err := proto.Marshal(Encode(codecSamples[0]))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"truncated":                renew[:9],
		"a varint past the end":    {0x10, 0xff},
		"field number 0":           {0x00, 0x01},
		"a node that is not UTF8":  {0x0a, 0x02, 0xff, 0xfe},
		"an end group never begun": {0x0c},
	} {
		if m, err := remote.Deserialize(b, "connactor.fleet.Renew", remote.DefaultSerializerID); err == nil {
			t.Errorf("%s: read as %v", name, m)
		}
	}
}

func TestCodecRefusesMessagesTheProtocolCannotActOn(t *testing.T) {
	handoff := func(ls ...LedgerState) proto.Message { return Encode(Handoff{From: "h0", Epoch: 1, Ledgers: ls}) }
	for name, m := range map[string]proto.Message{
		"not a fleet message":    &fleetpb.Entry{Route: "r"},
		"a nil message":          (*fleetpb.Renew)(nil),
		"renewal without node":   Encode(Renew{Seq: 1, Budget: 1}),
		"renewal without seq":    Encode(Renew{Node: "n", Budget: 1}),
		"renewal without budget": Encode(Renew{Node: "n", Seq: 1}),
		"entry without route":    Encode(Renew{Node: "n", Seq: 1, Budget: 4, Entries: []Entry{{Need: 1}}}),
		"entry with a negative need": Encode(Renew{Node: "n", Seq: 1, Budget: 4,
			Entries: []Entry{{Route: "r", Need: -1}}}),
		"reply without host":          Encode(RenewReply{Seq: 1}),
		"reply with a negative lease": Encode(RenewReply{Host: "h", Seq: 1, Lease: -time.Second}),
		"grant of an unknown status":  Encode(RenewReply{Host: "h", Grants: []Grant{{Status: 9}}}),
		"grant of a negative count":   Encode(RenewReply{Host: "h", Grants: []Grant{{Grant: -1}}}),
		"nudge without host":          Encode(Nudge{}),
		"handoff without sender":      Encode(Handoff{Epoch: 1}),
		"handoff without epoch":       Encode(Handoff{From: "h0"}),
		"handoff of a negative shard": Encode(Handoff{From: "h0", Epoch: 1, Shard: -1}),
		"ledger without route":        handoff(LedgerState{Holders: []HolderState{{Node: "n1", Budget: 4, Need: 1}}}),
		"holder without node":         handoff(LedgerState{Route: "r", Holders: []HolderState{{Budget: 4, Need: 1}}}),
		"live holder without budget":  handoff(LedgerState{Route: "r", Holders: []HolderState{{Node: "n1", Need: 1}}}),
		"holder with a negative expiry": handoff(LedgerState{Route: "r",
			Holders: []HolderState{{Node: "n1", Budget: 4, ExpiresIn: -time.Second}}}),
		"acknowledgement without sender": Encode(HandoffAck{Epoch: 1}),
	} {
		if got, err := Decode(m); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: decoded %+v, %v; want ErrMalformed", name, got, err)
		}
	}
}
