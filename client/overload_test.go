package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/connactor/connactor/telemetry"
)

// gaugeOf returns the int64 gauge value of metric name (its one data point).
func gaugeOf(ms map[string]metricdata.Metrics, name string) (int64, bool) {
	g, ok := ms[name].Data.(metricdata.Gauge[int64])
	if !ok || len(g.DataPoints) != 1 {
		return 0, false
	}
	return g.DataPoints[0].Value, true
}

// seenServer records the X-Call header of every request that reaches it, and
// holds the one named "held" until release is closed.
type seenServer struct {
	mu      sync.Mutex
	seen    []string
	arrived chan string
	release chan struct{}
}

func newSeenServer(t *testing.T) (*seenServer, *httptest.Server) {
	s := &seenServer{arrived: make(chan string, 16), release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Call")
		s.mu.Lock()
		s.seen = append(s.seen, id)
		s.mu.Unlock()
		s.arrived <- id
		if id == "held" {
			<-s.release
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return s, srv
}

func (s *seenServer) saw() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

func callID(c *Client, url, id string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Call", id)
	return c.RoundTrip(req)
}

// Callers behind a request that holds the route's one connection wait past
// QueueTarget through the interval: each is refused with ErrOverloaded, which
// is ErrNotSent, none of their requests reaches the server, and the route's
// Stats and connactor.route.shed (error.type overloaded) count them.
func TestAShedRequestIsErrOverloadedAndNeverReachesTheServer(t *testing.T) {
	checkLeaks(t)
	s, srv := newSeenServer(t)
	o := newObserved(t, Config{MaxConnsPerRoute: 1, QueueTarget: 20 * time.Millisecond})
	held := make(chan error, 1)
	go func() { // owned by the test, which reads held
		resp, err := callID(o.c, srv.URL, "held")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		held <- err
	}()
	if id := <-s.arrived; id != "held" {
		t.Fatalf("the server saw %q first, want held", id)
	}
	errs := make(chan error, 3)
	for _, id := range []string{"a", "b", "c"} {
		go func() { // owned by the test, which reads errs
			resp, err := callID(o.c, srv.URL, id)
			if err == nil {
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; !errors.Is(err, ErrOverloaded) || !errors.Is(err, ErrNotSent) {
			t.Fatalf("a caller behind the held request: %v, want ErrOverloaded and ErrNotSent", err)
		}
	}
	close(s.release)
	if err := <-held; err != nil {
		t.Fatalf("the held request: %v", err)
	}
	if saw := s.saw(); len(saw) != 1 || saw[0] != "held" {
		t.Fatalf("the server saw %v, want only the held request", saw)
	}
	st := o.c.Stats().Routes[0]
	if st.Shed != 3 || st.Limit != 1 || st.Pending != 0 {
		t.Fatalf("route stats: shed %d, limit %d, pending %d; want 3, 1, 0", st.Shed, st.Limit, st.Pending)
	}
	ms := o.collect(t)
	if got := sumOf(ms, telemetry.MetricRouteShed, attribute.String("error.type", "overloaded")); got != 3 {
		t.Fatalf("%s{error.type=overloaded} = %d, want 3", telemetry.MetricRouteShed, got)
	}
	if got, ok := gaugeOf(ms, telemetry.MetricRouteLimit); !ok || got != 1 {
		t.Fatalf("%s = %d (reported %v), want 1", telemetry.MetricRouteLimit, got, ok)
	}
}

// A route with Adaptive learns its no-load latency from its own requests
// (their write to their response head, measured by the callers), keeps its
// limit within Min and the initial limit (one request at a time never
// raises it; a slower answer on a loaded machine may lower it), reports
// nothing in flight once they are done, and its gauge says the same limit.
func TestAnAdaptiveRouteMeasuresItsNoLoadLatency(t *testing.T) {
	checkLeaks(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond) // a latency the route can measure
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	o := newObserved(t, Config{MaxConnsPerRoute: 16, Adaptive: &AdaptiveLimit{Initial: 5}})
	for range 3 {
		resp, err := getURL(o.c, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	st := o.c.Stats().Routes[0]
	if st.NoLoad < 2*time.Millisecond || st.Limit < 1 || st.Limit > 5 || st.InFlight != 0 || st.Max != 16 {
		t.Fatalf("no-load %v, limit %d, in flight %d, max %d; want >= 2ms, in [1, 5], 0, 16", st.NoLoad, st.Limit, st.InFlight, st.Max)
	}
	if got, ok := gaugeOf(o.collect(t), telemetry.MetricRouteLimit); !ok || got != int64(st.Limit) {
		t.Fatalf("%s = %d (reported %v), want %d", telemetry.MetricRouteLimit, got, ok, st.Limit)
	}
}

// Config refuses overload settings that cannot hold, and fills Adaptive's
// Min without changing the caller's value.
func TestConfigValidatesTheOverloadSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"a negative QueueTarget", Config{QueueTarget: -time.Millisecond}},
		{"a negative Adaptive.Min", Config{Adaptive: &AdaptiveLimit{Min: -1}}},
		{"Adaptive.Min above MaxConnsPerRoute", Config{MaxConnsPerRoute: 4, Adaptive: &AdaptiveLimit{Min: 5}}},
		{"Adaptive.Initial below Adaptive.Min", Config{Adaptive: &AdaptiveLimit{Min: 3, Initial: 2}}},
	} {
		if _, err := tc.cfg.withDefaults(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", tc.name, err)
		}
	}
	a := &AdaptiveLimit{}
	cfg, err := Config{Adaptive: a}.withDefaults()
	if err != nil || cfg.Adaptive.Min != 1 || a.Min != 0 {
		t.Fatalf("filled Min %d (err %v), caller's Min %d; want 1, nil, 0", cfg.Adaptive.Min, err, a.Min)
	}
}
