package route

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fill sets every field of the struct v points to a non-zero value (7, "x",
// 7 seconds, a map or slice of one such value), recursing into slices of
// structs, so that a field forgotten by code that copies or encodes it shows.
func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch {
		case f.Type() == reflect.TypeOf(time.Time{}):
			f.Set(reflect.ValueOf(time.Unix(7, 0).UTC()))
		case f.Type() == reflect.TypeOf(time.Duration(0)):
			f.SetInt(int64(7 * time.Second))
		case f.Type() == reflect.TypeOf(netip.AddrPort{}):
			f.Set(reflect.ValueOf(netip.MustParseAddrPort("127.0.0.7:7")))
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.Kind() == reflect.String:
			f.SetString("x")
		case f.Kind() == reflect.Int, f.Kind() == reflect.Int64:
			f.SetInt(7)
		case f.Kind() == reflect.Uint64:
			f.SetUint(7)
		case f.Kind() == reflect.Map:
			f.Set(reflect.ValueOf(map[string]uint64{"x": 7}))
		case f.Kind() == reflect.Slice:
			s := reflect.MakeSlice(f.Type(), 1, 1)
			fill(t, s.Index(0))
			f.Set(s)
		default:
			t.Fatalf("field %s: kind %s not covered by the test", v.Type().Field(i).Name, f.Kind())
		}
	}
}

// Every field of Stats, its closes and waits included, survives a trip
// through JSON, under its own JSON name, with durations in seconds: a field
// added and forgotten in the JSON's shadow of it fails here.
func TestStatsTravelThroughJSONWithDurationsInSeconds(t *testing.T) {
	var in Stats
	fill(t, reflect.ValueOf(&in).Elem())
	in.Leases, in.Reuses = 4, 3
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(in)
	for i := 0; i < typ.NumField(); i++ {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name == "" {
			t.Errorf("Stats.%s has no JSON name", typ.Field(i).Name)
		} else if _, ok := keys[name]; !ok {
			t.Errorf("Stats.%s is not in the JSON as %q: %s", typ.Field(i).Name, name, b)
		}
	}
	for _, k := range []string{"learnedIdle", "oldestLease", "fleetRenewal", "hedgeDelay"} {
		if keys[k] != 7.0 {
			t.Errorf("%s: %v in JSON, want 7 (seconds)", k, keys[k])
		}
	}
	if keys["reuseRatio"] != 0.75 {
		t.Errorf("reuseRatio: %v, want 0.75", keys["reuseRatio"])
	}
	closes := keys["recentCloses"].([]any)[0].(map[string]any)
	waits := keys["recentWaits"].([]any)[0].(map[string]any)
	if closes["age"] != 7.0 || waits["waited"] != 7.0 {
		t.Errorf("close age %v, wait %v in JSON, want 7 (seconds)", closes["age"], waits["waited"])
	}
	if ep := keys["endpoints"].([]any)[0].(map[string]any); ep["addr"] != "127.0.0.7:7" || ep["draining"] != true {
		t.Errorf("endpoint in JSON: %v, want its address as a string and its state", ep)
	}
	var out Stats
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("after a trip through JSON:\n got %+v\nwant %+v", out, in)
	}
}

// A closed breaker's deadline, zero, is left out of the JSON.
func TestStatsJSONLeavesOutAZeroFailFastDeadline(t *testing.T) {
	b, err := json.Marshal(Stats{Route: "http://a:80", FailFast: FailFastClosed})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "failFastUntil") || strings.Contains(string(b), "fleetState") {
		t.Errorf("a closed breaker and no fleet budget: %s", b)
	}
}

// String prints a header and one row of the route's counts, then its closes
// by reason.
func TestStatsPrintAsAShortTable(t *testing.T) {
	s := Stats{Route: "http://127.0.0.1:8080", Open: 3, Leased: 1, Idle: 2, Max: 8, Leases: 4, Reuses: 3,
		FailFast: FailFastClosed, ClosedBy: map[string]uint64{string(ReasonEvicted): 2}}
	lines := strings.Split(strings.TrimSpace(s.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), s)
	}
	head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	if head[0] != "route" || row[0] != s.Route || row[1] != "3" || row[2] != "1" || row[3] != "2" || row[8] != "75%" {
		t.Errorf("table:\n%s", s)
	}
	if !strings.Contains(lines[2], "lru_eviction:2") {
		t.Errorf("closes by reason: %q", lines[2])
	}
}

// String ends with a line per endpoint: its address, state and counts.
func TestStatsPrintTheirEndpointsOneALine(t *testing.T) {
	s := Stats{Route: "http://svc.test:80", Open: 3, Endpoints: []EndpointStats{
		{Addr: netip.MustParseAddrPort("127.0.0.2:80"), Open: 2, Leased: 1, Idle: 1, Dials: 2},
		{Addr: netip.MustParseAddrPort("127.0.0.3:80"), Open: 1, Leased: 1, Dials: 3, DialFailures: 2, Draining: true},
	}}
	lines := strings.Split(strings.TrimSpace(s.String()), "\n")
	want := []string{
		"endpoint 127.0.0.2:80: up, 2 open (1 leased, 1 idle), 2 dials, 0 failed",
		"endpoint 127.0.0.3:80: draining, 1 open (1 leased, 0 idle), 3 dials, 2 failed",
	}
	if len(lines) != 4 || lines[2] != want[0] || lines[3] != want[1] {
		t.Errorf("table:\n%s\nwant its last lines:\n%s", s, strings.Join(want, "\n"))
	}
}

// String ends with the route's hedged attempts, when it made any.
func TestStatsPrintTheirHedgesWhenThereWereAny(t *testing.T) {
	s := Stats{Route: "http://svc.test:80", Hedges: 7, HedgeWins: 3}
	lines := strings.Split(strings.TrimSpace(s.String()), "\n")
	if want := "hedged attempts: 7, of which 3 won"; lines[len(lines)-1] != want {
		t.Errorf("table:\n%s\nwant its last line %q", s, want)
	}
	s.Hedges, s.HedgeWins = 0, 0
	if strings.Contains(s.String(), "hedged") {
		t.Errorf("no hedge, yet:\n%s", s)
	}
}
