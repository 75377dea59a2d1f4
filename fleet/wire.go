package fleet

import (
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
)

// The messages that cross the cluster are protobuf, as protoactor's remote layer
// requires. They travel as google.protobuf.Struct values (structpb), which need
// no generated code: the field "type" names the message and the other fields
// are numbers, strings and booleans. Each message has a Go struct here and a
// pair of functions that convert it; nothing outside this file reads a Struct.
//
//	ShareRequest   keeper -> budget grain (cluster.Request), answered with ShareResponse
//	ShareResponse  budget grain -> keeper, the answer to one ShareRequest
//	RenewNow       budget grain -> keeper (Send to the keeper's PID), no reply
const (
	typeShareRequest  = "connactor.fleet.ShareRequest"
	typeShareResponse = "connactor.fleet.ShareResponse"
	typeRenewNow      = "connactor.fleet.RenewNow"
)

// nodeID names a keeper: its PID's address and id. A keeper is one node's view
// of the fleet budget (one client on one cluster member).
type nodeID struct {
	Address, ID string
}

func (n nodeID) key() string { return n.Address + "/" + n.ID }

// shareRequest is what a keeper tells a route's budget grain and asks of it.
type shareRequest struct {
	Route  string
	Node   nodeID
	Seq    uint64 // grows with every request of this keeper for this route
	Budget int    // the keeper's configured fleet budget for the route
	// Has is the grant the node enforces now: its last granted share while that
	// lease is valid, 0 otherwise (a floor is not a grant). The grain counts at
	// least this much for the node until its next request.
	Has  int
	Held int // connections the node holds now (open and dialing)
	Want int // the share the node would like (its demand plus headroom)
	// Floor is the floor share the node enforces now because its lease
	// expired while the grain could not be reached; 0 when it is not on its
	// floor. A grain in safe mode may grant it that much (see ledger).
	Floor int
}

// shareResponse is the grain's answer to a shareRequest.
type shareResponse struct {
	Grant  int           // the node's share until Lease has passed
	Budget int           // the budget the grain divides (the smallest any node asked for)
	Lease  time.Duration // how long Grant holds, counted from when the request was sent
	// Safe is how much longer the grain stays in safe mode (0: not in safe
	// mode): while it is, it grants no node more than it reports holding.
	Safe time.Duration
	// RetryAfter, when set, is when asking again for more could be answered
	// differently (the end of safe mode, or after others gave some back).
	RetryAfter time.Duration
	Nodes      int  // nodes holding a lease for the route
	Stale      bool // the request was older than one already answered: ignore
}

// renewNow asks a keeper to send its request for Route now: the grain wants it
// to shrink, or has room for it.
type renewNow struct {
	Route string
}

func (r shareRequest) proto() *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"type":    structpb.NewStringValue(typeShareRequest),
		"route":   structpb.NewStringValue(r.Route),
		"address": structpb.NewStringValue(r.Node.Address),
		"id":      structpb.NewStringValue(r.Node.ID),
		"seq":     structpb.NewNumberValue(float64(r.Seq)),
		"budget":  structpb.NewNumberValue(float64(r.Budget)),
		"has":     structpb.NewNumberValue(float64(r.Has)),
		"held":    structpb.NewNumberValue(float64(r.Held)),
		"want":    structpb.NewNumberValue(float64(r.Want)),
		"floor":   structpb.NewNumberValue(float64(r.Floor)),
	}}
}

func (r shareResponse) proto() *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"type":     structpb.NewStringValue(typeShareResponse),
		"grant":    structpb.NewNumberValue(float64(r.Grant)),
		"budget":   structpb.NewNumberValue(float64(r.Budget)),
		"lease_ms": structpb.NewNumberValue(float64(r.Lease.Milliseconds())),
		"safe_ms":  structpb.NewNumberValue(float64(r.Safe.Milliseconds())),
		"retry_ms": structpb.NewNumberValue(float64(r.RetryAfter.Milliseconds())),
		"nodes":    structpb.NewNumberValue(float64(r.Nodes)),
		"stale":    structpb.NewBoolValue(r.Stale),
	}}
}

func (r renewNow) proto() *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"type":  structpb.NewStringValue(typeRenewNow),
		"route": structpb.NewStringValue(r.Route),
	}}
}

// wireType returns the "type" field of s, or "" when s is not one of ours.
func wireType(s *structpb.Struct) string {
	if s == nil {
		return ""
	}
	v, ok := s.GetFields()["type"]
	if !ok {
		return ""
	}
	return v.GetStringValue()
}

// fields reads typed fields out of a Struct and remembers the first error.
type fields struct {
	s   *structpb.Struct
	err error
}

func (f *fields) value(name string) *structpb.Value {
	v, ok := f.s.GetFields()[name]
	if !ok && f.err == nil {
		f.err = fmt.Errorf("%w: %s lacks field %q", ErrBadMessage, wireType(f.s), name)
	}
	return v
}

func (f *fields) str(name string) string {
	v := f.value(name)
	if v == nil {
		return ""
	}
	if _, ok := v.GetKind().(*structpb.Value_StringValue); !ok && f.err == nil {
		f.err = fmt.Errorf("%w: field %q is not a string", ErrBadMessage, name)
	}
	return v.GetStringValue()
}

func (f *fields) boolean(name string) bool {
	v := f.value(name)
	if v == nil {
		return false
	}
	if _, ok := v.GetKind().(*structpb.Value_BoolValue); !ok && f.err == nil {
		f.err = fmt.Errorf("%w: field %q is not a boolean", ErrBadMessage, name)
	}
	return v.GetBoolValue()
}

// num reads a whole number in [0, 2^53]: the range a float64 holds exactly.
func (f *fields) num(name string) uint64 {
	v := f.value(name)
	if v == nil {
		return 0
	}
	n, ok := v.GetKind().(*structpb.Value_NumberValue)
	if !ok || n.NumberValue < 0 || n.NumberValue > 1<<53 || n.NumberValue != math.Trunc(n.NumberValue) {
		if f.err == nil {
			f.err = fmt.Errorf("%w: field %q is not a whole number in range", ErrBadMessage, name)
		}
		return 0
	}
	return uint64(n.NumberValue)
}

// count reads a number of connections; budgets and shares stay far below 2^31.
func (f *fields) count(name string) int {
	n := f.num(name)
	if n > math.MaxInt32 {
		if f.err == nil {
			f.err = fmt.Errorf("%w: field %q is out of range", ErrBadMessage, name)
		}
		return 0
	}
	return int(n)
}

func (f *fields) millis(name string) time.Duration {
	return time.Duration(f.count(name)) * time.Millisecond
}

func (f *fields) expect(typ string) {
	if got := wireType(f.s); got != typ {
		f.err = fmt.Errorf("%w: want %s, got %q", ErrBadMessage, typ, got)
	}
}

func decodeShareRequest(s *structpb.Struct) (shareRequest, error) {
	f := fields{s: s}
	f.expect(typeShareRequest)
	r := shareRequest{
		Route:  f.str("route"),
		Node:   nodeID{Address: f.str("address"), ID: f.str("id")},
		Seq:    f.num("seq"),
		Budget: f.count("budget"),
		Has:    f.count("has"),
		Held:   f.count("held"),
		Want:   f.count("want"),
		Floor:  f.count("floor"),
	}
	if f.err == nil && (r.Route == "" || r.Node.ID == "") {
		f.err = fmt.Errorf("%w: ShareRequest without route or node", ErrBadMessage)
	}
	return r, f.err
}

func decodeShareResponse(s *structpb.Struct) (shareResponse, error) {
	f := fields{s: s}
	f.expect(typeShareResponse)
	r := shareResponse{
		Grant:      f.count("grant"),
		Budget:     f.count("budget"),
		Lease:      f.millis("lease_ms"),
		Safe:       f.millis("safe_ms"),
		RetryAfter: f.millis("retry_ms"),
		Nodes:      f.count("nodes"),
		Stale:      f.boolean("stale"),
	}
	return r, f.err
}

func decodeRenewNow(s *structpb.Struct) (renewNow, error) {
	f := fields{s: s}
	f.expect(typeRenewNow)
	return renewNow{Route: f.str("route")}, f.err
}
