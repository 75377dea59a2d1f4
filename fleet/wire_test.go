package fleet

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// roundTrip marshals s as the remote layer does and reads it back.
func roundTrip(t *testing.T, s *structpb.Struct) *structpb.Struct {
	t.Helper()
	b, err := proto.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out structpb.Struct
	if err := proto.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestWireMessagesSurviveProtobufMarshalling(t *testing.T) {
	req := shareRequest{Route: "http://10.0.0.1:8080", Node: nodeID{"127.0.0.1:4000", "fleet-keeper$1"}, Seq: 1 << 40, Budget: 300, Has: 7, Held: 9, Want: 12, Floor: 3}
	gotReq, err := decodeShareRequest(roundTrip(t, req.proto()))
	if err != nil || gotReq != req {
		t.Fatalf("request: got %+v, %v; want %+v", gotReq, err, req)
	}
	resp := shareResponse{Grant: 5, Budget: 300, Lease: 3 * time.Second, Safe: 1500 * time.Millisecond, RetryAfter: 375 * time.Millisecond, Nodes: 3, Stale: true}
	gotResp, err := decodeShareResponse(roundTrip(t, resp.proto()))
	if err != nil || gotResp != resp {
		t.Fatalf("response: got %+v, %v; want %+v", gotResp, err, resp)
	}
	n := renewNow{Route: "https://example.test:443"}
	gotN, err := decodeRenewNow(roundTrip(t, n.proto()))
	if err != nil || gotN != n {
		t.Fatalf("renew: got %+v, %v; want %+v", gotN, err, n)
	}
}

func TestWireRejectsMalformedMessages(t *testing.T) {
	valid := func() *structpb.Struct {
		return shareRequest{Route: "r", Node: nodeID{"a", "k"}, Seq: 1, Budget: 3}.proto()
	}
	for _, tc := range []struct {
		name  string
		spoil func(s *structpb.Struct)
	}{
		{"other type", func(s *structpb.Struct) { s.Fields["type"] = structpb.NewStringValue(typeRenewNow) }},
		{"no type", func(s *structpb.Struct) { delete(s.Fields, "type") }},
		{"missing field", func(s *structpb.Struct) { delete(s.Fields, "held") }},
		{"negative number", func(s *structpb.Struct) { s.Fields["want"] = structpb.NewNumberValue(-1) }},
		{"fraction", func(s *structpb.Struct) { s.Fields["has"] = structpb.NewNumberValue(1.5) }},
		{"huge count", func(s *structpb.Struct) { s.Fields["budget"] = structpb.NewNumberValue(1 << 40) }},
		{"string for number", func(s *structpb.Struct) { s.Fields["seq"] = structpb.NewStringValue("1") }},
		{"number for string", func(s *structpb.Struct) { s.Fields["route"] = structpb.NewNumberValue(1) }},
		{"empty route", func(s *structpb.Struct) { s.Fields["route"] = structpb.NewStringValue("") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := valid()
			tc.spoil(s)
			if _, err := decodeShareRequest(s); !errors.Is(err, ErrBadMessage) {
				t.Fatalf("got %v, want ErrBadMessage", err)
			}
		})
	}
	if _, err := decodeShareResponse(nil); !errors.Is(err, ErrBadMessage) {
		t.Fatalf("nil response: got %v, want ErrBadMessage", err)
	}
}
