package telemetry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/connactor/connactor/route"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "grain did not answer" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestFleetRenewalsAreTimedByOutcome(t *testing.T) {
	tel, _, reader := sdkTelemetry(t)
	tel.FleetRenewal(200*time.Microsecond, nil)
	tel.FleetRenewal(300*time.Microsecond, nil)
	tel.FleetRenewal(time.Second, fmt.Errorf("fleet: %w", timeoutErr{}))
	tel.FleetRenewal(time.Millisecond, errors.New("cluster: no member"))
	var nilTel *Telemetry
	nilTel.FleetRenewal(time.Second, nil) // records nothing, does not panic

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name != MetricFleetRenewal {
			continue
		}
		for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
			v, _ := dp.Attributes.Value("error.type")
			got[v.AsString()] = dp.Count
		}
	}
	want := map[string]uint64{"": 2, ErrorTypeTimeout: 1, ErrorTypeOther: 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("renewals by error.type: %v, want %v", got, want)
	}
}

func TestFleetShareIsObservedOnlyForRoutesWithABudget(t *testing.T) {
	tel, _, reader := sdkTelemetry(t)
	a := tel.Route("http", "a.test", "80")
	b := tel.Route("http", "b.test", "80")
	readings := []RouteReading{
		{Route: a, Fleet: true, Stats: route.Stats{FleetShare: 4}},
		{Route: a, Fleet: true, Stats: route.Stats{FleetShare: 2}}, // another identity, same destination
		{Route: b},
	}
	rm := collectReadings(t, tel, reader, readings)
	got := int64Points(rm, func(name string, attrs attribute.Set) string {
		if name != MetricFleetShare {
			return ""
		}
		host, _ := attrs.Value("server.address")
		return host.AsString()
	})
	if len(got) != 1 || got["a.test"] != 6 {
		t.Fatalf("fleet shares: %v, want a.test 6 only", got)
	}
}
