package route

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/connactor/connactor/internal/jsonsec"
)

// Stats is one route's snapshot: what its route actor reports of itself, as
// client.RouteStats, the status page (in JSON: durations in seconds) and the
// pool gauges read it. The gauges read only what the route actor publishes
// without a message: Leased, Idle, Pending, FailFast, LearnedIdle and
// FleetShare.
type Stats struct {
	Route string `json:"route"` // e.g. "http://127.0.0.1:8080"; names proxy and identity when set
	// Open counts connections open or being dialed; Leased, those serving a
	// request (their body not yet read to its end or closed); Idle, those in
	// the idle list; Pending, callers waiting for a connection.
	Open    int `json:"open"`
	Leased  int `json:"leased"`
	Idle    int `json:"idle"`
	Pending int `json:"pending"`
	Max     int `json:"max"` // MaxConnsPerRoute
	// Streams is the number of HTTP/2 streams in flight on the route's
	// connections. An HTTP/2 connection is shared capacity: it counts once in
	// Open, and as Leased while it carries any stream.
	Streams int `json:"streams"`

	Dialing       int               `json:"dialing"`                // connections being dialed (counted in Open)
	Opened        uint64            `json:"opened"`                 // connections opened since the route started
	Closed        uint64            `json:"closed"`                 // connections closed since the route started
	Leases        uint64            `json:"leases"`                 // leases granted
	Reuses        uint64            `json:"reuses"`                 // leases granted on a re-used connection
	Offered       uint64            `json:"offered"`                // of Leases, those taken from the route's outbox (no message to the route)
	DialFailures  uint64            `json:"dialFailures"`           // dials that failed
	LeaseTimeouts uint64            `json:"leaseTimeouts"`          // callers that gave up after LeaseTimeout
	QueueFull     uint64            `json:"queueFull"`              // callers refused with ErrQueueFull (MaxPendingPerRoute)
	FailFast      string            `json:"failFast"`               // FailFastClosed, FailFastOpen (calls fail with ErrRouteUnavailable) or FailFastHalfOpen (a probe dial may go)
	FailFastUntil time.Time         `json:"failFastUntil,omitzero"` // while open: when the next probe may go
	FailedFast    uint64            `json:"failedFast"`             // callers refused with ErrRouteUnavailable
	LearnedIdle   time.Duration     `json:"learnedIdle"`            // the idle timeout the route learned of its server (0 = none); idle connections are retired before it
	ClosedBy      map[string]uint64 `json:"closedBy"`               // Closed by reason (a CloseReason: idle_expiry, lru_eviction, ...); sums to Closed
	OldestLease   time.Duration     `json:"oldestLease"`            // age of this route's oldest unreleased lease (0 = none)
	// SpareActors counts the connection actors the route keeps without a
	// socket, to serve its next dials (an actor whose connection closed is
	// recycled rather than stopped: a few per route, with no goroutine,
	// socket or buffer each; they stop once the route has had no connection
	// for MaxIdleTime).
	SpareActors int `json:"spareActors"`

	RecentCloses []ClosedConn `json:"recentCloses"` // the last connection closes (evictions, expiries, ...), newest first, at most 16
	RecentWaits  []Wait       `json:"recentWaits"`  // the last leases that waited in the route's queue, newest first, at most 16

	// The fleet budget (all zero without one). FleetShare is this node's
	// current share of it: the most connections the route may hold now (0
	// when none is set). FleetBudget is the fleet-wide budget the share is
	// part of. FleetState says where the share comes from (client's
	// FleetNone, FleetLease, FleetSafe, FleetFloor; "" without a fleet
	// budget), and FleetRenewal is how long the last answered renewal with
	// the host of the route's ledger took.
	FleetShare   int           `json:"fleetShare"`
	FleetBudget  int           `json:"fleetBudget"`
	FleetState   string        `json:"fleetState,omitempty"`
	FleetRenewal time.Duration `json:"fleetRenewal"`

	// Endpoints are the addresses the route's host resolves to (through a
	// proxy, the proxy's), each with the route's connections to it, in the
	// resolver's order, then those that left the resolved set and still
	// have connections (Draining). Empty for an IP literal, with
	// DNSRefresh -1, and for a DialContext without a Resolver: the dial
	// then decides the address. ResolvedAt is the last successful
	// resolution; ResolveErr is the last resolution's error when it failed
	// (or found no address: the last good set is kept), "" otherwise.
	Endpoints  []EndpointStats `json:"endpoints,omitempty"`
	ResolvedAt time.Time       `json:"resolvedAt,omitzero"`
	ResolveErr string          `json:"resolveErr,omitempty"`

	// Hedged requests (client's Config.Hedge; both zero without it).
	// Hedges counts hedged attempts written to a connection or stream (the
	// first attempt of a request is no hedge); HedgeWins, requests whose
	// response came from a hedged attempt. HedgeDelay is how long a hedged
	// request's first attempt waits now before a hedge goes: the policy's
	// Delay, or the route's latency at its percentile, write to response
	// head, as last measured (0 until then).
	Hedges     uint64        `json:"hedges"`
	HedgeWins  uint64        `json:"hedgeWins"`
	HedgeDelay time.Duration `json:"hedgeDelay"` // seconds in JSON

	// Overload control. Limit is the route's limit on its requests in
	// flight now: the smallest of its fixed limit (MaxConnsPerRoute, or on
	// HTTP/2 the streams its connections allow), the one Adaptive chose,
	// and what MaxConnsPerHost and its fleet share let it hold (those
	// connections, each carrying what one carries); InFlight, its requests in flight (leases plus HTTP/2
	// streams); NoLoad, the no-load latency it measured (0 without
	// Adaptive); Shed, the callers refused with ErrOverloaded (QueueTarget).
	Limit    int           `json:"limit"`
	InFlight int           `json:"inFlight"`
	NoLoad   time.Duration `json:"noLoad"`
	Shed     uint64        `json:"shed"`
}

// EndpointStats is one address of a route's endpoints (Stats.Endpoints): its
// connections open (dialing included), leased and idle, the dials made to it
// and how many failed to connect since the route started, and its state.
// EjectedUntil is zero unless dials to it (or, with an outlier policy, its
// exchanges: EjectedBy) failed and the route leaves it alone until then (a
// back-off, 1 s doubling to 30 s, jittered) while others remain; Draining
// says it left the resolved set: its connections close as they come free,
// and no new one goes to it.
type EndpointStats struct {
	Addr         netip.AddrPort `json:"addr"`
	Open         int            `json:"open"`
	Leased       int            `json:"leased"`
	Idle         int            `json:"idle"`
	Dials        int64          `json:"dials"`
	DialFailures int64          `json:"dialFailures"`
	EjectedUntil time.Time      `json:"ejectedUntil,omitzero"`
	Draining     bool           `json:"draining,omitempty"`

	// The outlier rule (Config.Outlier) and HTTP/2's spread. EjectedBy says
	// which rule started the back-off EjectedUntil shows: "dials" (its dials
	// failed to connect) or "exchanges" (its last exchanges failed: 5xx
	// heads or errors after the lease); "" while it is not ejected. An
	// address ejected for its exchanges beyond MaxEjectedPercent serves
	// again, least recently ejected first, while it still shows its
	// back-off here: the cap decides who serves, the back-off when its
	// count starts again. Ejections counts its ejections for failed exchanges since the route
	// started. Streams is the HTTP/2 streams in flight to it.
	EjectedBy string `json:"ejectedBy,omitempty"`
	Ejections uint64 `json:"ejections"`
	Streams   int    `json:"streams"`
}

// State names the endpoint's state as the status page and String show it:
// "draining", "ejected" or "up".
func (e EndpointStats) State() string {
	switch {
	case e.Draining:
		return "draining"
	case !e.EjectedUntil.IsZero():
		return "ejected"
	}
	return "up"
}

// States of a route's fail-fast breaker (Stats.FailFast).
const (
	FailFastClosed   = "closed"    // dials go out
	FailFastOpen     = "open"      // calls fail at once until FailFastUntil
	FailFastHalfOpen = "half_open" // one probe dial may go out
)

// ReuseRatio is the share of leases served by a re-used connection.
func (s Stats) ReuseRatio() float64 {
	if s.Leases == 0 {
		return 0
	}
	return float64(s.Reuses) / float64(s.Leases)
}

// String prints s as a short table: the route's counts, then its closes by
// reason, then its endpoints, one line each.
func (s Stats) String() string {
	var b strings.Builder
	WriteTable(&b, s)
	if len(s.ClosedBy) > 0 {
		fmt.Fprintf(&b, "closed by reason: %v\n", s.ClosedBy)
	}
	for _, e := range s.Endpoints {
		state := e.State()
		if e.EjectedBy != "" {
			state += " (its " + e.EjectedBy + " failed)"
		}
		fmt.Fprintf(&b, "endpoint %s: %s, %d open (%d leased, %d idle), %d dials, %d failed", e.Addr, state, e.Open,
			e.Leased, e.Idle, e.Dials, e.DialFailures)
		if e.Streams > 0 {
			fmt.Fprintf(&b, ", %d streams", e.Streams)
		}
		if e.Ejections > 0 {
			fmt.Fprintf(&b, ", ejected %d times for failed exchanges", e.Ejections)
		}
		b.WriteByte('\n')
	}
	if s.Hedges > 0 {
		fmt.Fprintf(&b, "hedged attempts: %d, of which %d won\n", s.Hedges, s.HedgeWins)
	}
	return b.String()
}

// WriteTable writes routes to w as a table, one row a route, under a header.
func WriteTable(w io.Writer, routes ...Stats) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "route\topen\tleased\tidle\tdialing\tpending\tmax\tstreams\treuse\tfail-fast\toldest lease")
	for _, s := range routes {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f%%\t%s\t%v\n", s.Route, s.Open, s.Leased, s.Idle, s.Dialing,
			s.Pending, s.Max, s.Streams, 100*s.ReuseRatio(), s.FailFast, s.OldestLease.Round(time.Millisecond))
	}
	return tw.Flush()
}

// plainStats is Stats without its methods, for the JSON of its fields; the
// fields of statsJSON, less nested, shadow those of the same names.
type plainStats Stats

// statsJSON is Stats as JSON carries it: durations in seconds, and the reuse
// ratio.
type statsJSON struct {
	*plainStats
	LearnedIdle  jsonsec.Duration `json:"learnedIdle"`
	OldestLease  jsonsec.Duration `json:"oldestLease"`
	FleetRenewal jsonsec.Duration `json:"fleetRenewal"`
	NoLoad       jsonsec.Duration `json:"noLoad"`
	HedgeDelay   jsonsec.Duration `json:"hedgeDelay"`
	ReuseRatio   float64          `json:"reuseRatio"` // Reuses / Leases; ignored when read
}

// MarshalJSON writes s with its durations in seconds and its reuse ratio.
func (s Stats) MarshalJSON() ([]byte, error) {
	return json.Marshal(statsJSON{plainStats: (*plainStats)(&s), LearnedIdle: jsonsec.Duration(s.LearnedIdle),
		OldestLease: jsonsec.Duration(s.OldestLease), FleetRenewal: jsonsec.Duration(s.FleetRenewal), NoLoad: jsonsec.Duration(s.NoLoad),
		HedgeDelay: jsonsec.Duration(s.HedgeDelay), ReuseRatio: s.ReuseRatio()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Stats) UnmarshalJSON(b []byte) error {
	v := statsJSON{plainStats: (*plainStats)(s)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	s.LearnedIdle, s.OldestLease = time.Duration(v.LearnedIdle), time.Duration(v.OldestLease)
	s.FleetRenewal, s.NoLoad = time.Duration(v.FleetRenewal), time.Duration(v.NoLoad)
	s.HedgeDelay = time.Duration(v.HedgeDelay)
	return nil
}

// ClosedConn is one recent connection close of a route: when, why, its age
// and how many requests it carried.
type ClosedConn struct {
	At     time.Time     `json:"at"`
	Reason CloseReason   `json:"reason"`
	Age    time.Duration `json:"age"`    // since the connection was started (JSON: seconds)
	Served int           `json:"served"` // requests it carried
}

type plainClosedConn ClosedConn

// MarshalJSON writes c with its age in seconds.
func (c ClosedConn) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		plainClosedConn
		Age jsonsec.Duration `json:"age"`
	}{plainClosedConn(c), jsonsec.Duration(c.Age)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *ClosedConn) UnmarshalJSON(b []byte) error {
	v := struct {
		*plainClosedConn
		Age jsonsec.Duration `json:"age"`
	}{plainClosedConn: (*plainClosedConn)(c)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	c.Age = time.Duration(v.Age)
	return nil
}

// Wait is one recent lease that had to wait in a route's queue: when it was
// granted, how long it waited and its position in the queue on arrival.
type Wait struct {
	At       time.Time     `json:"at"`       // when it was granted
	Waited   time.Duration `json:"waited"`   // JSON: seconds
	QueuePos int           `json:"queuePos"` // position on arrival, 1 = first in line
}

type plainWait Wait

// MarshalJSON writes w with its wait in seconds.
func (w Wait) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		plainWait
		Waited jsonsec.Duration `json:"waited"`
	}{plainWait(w), jsonsec.Duration(w.Waited)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (w *Wait) UnmarshalJSON(b []byte) error {
	v := struct {
		*plainWait
		Waited jsonsec.Duration `json:"waited"`
	}{plainWait: (*plainWait)(w)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	w.Waited = time.Duration(v.Waited)
	return nil
}
