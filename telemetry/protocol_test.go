package telemetry

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// A request that fails after its lease says the lease's protocol, on its span
// and in http.client.request.duration: "2" for a stream of an HTTP/2
// connection, "1.1" otherwise (and before any lease).
func TestAFailedRequestIsRecordedWithItsLeasesProtocol(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lease *LeaseInfo
		want  string
	}{
		{"an HTTP/2 stream", &LeaseInfo{HTTP2: true}, "2"},
		{"an HTTP/1.1 connection", &LeaseInfo{Reused: true}, "1.1"},
		{"no lease", nil, "1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tel, sr, reader := sdkTelemetry(t)
			req, _ := http.NewRequest(http.MethodGet, "https://example.test/", nil)
			_, r := tel.StartRequest(context.Background(), req, "https", "example.test", "443")
			if tc.lease != nil {
				r.LeaseGranted(*tc.lease)
			}
			r.Failed(errors.New("stream reset"))

			spans := sr.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans ended, want 1", len(spans))
			}
			got := ""
			for _, kv := range spans[0].Attributes() {
				if kv.Key == "network.protocol.version" {
					got = kv.Value.AsString() // the last one set wins
				}
			}
			if got != tc.want {
				t.Errorf("span: network.protocol.version = %q, want %q", got, tc.want)
			}

			var rm metricdata.ResourceMetrics
			if err := reader.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			var points []metricdata.HistogramDataPoint[float64]
			for _, m := range rm.ScopeMetrics[0].Metrics {
				if m.Name == "http.client.request.duration" {
					points = m.Data.(metricdata.Histogram[float64]).DataPoints
				}
			}
			if len(points) != 1 {
				t.Fatalf("http.client.request.duration: %d points, want 1", len(points))
			}
			if v, _ := points[0].Attributes.Value("network.protocol.version"); v != attribute.StringValue(tc.want) {
				t.Errorf("http.client.request.duration: network.protocol.version = %q, want %q", v.Emit(), tc.want)
			}
		})
	}
}

// A retry's lease replaces the first one's protocol.
func TestARetrysLeaseReplacesTheProtocolOfTheFirst(t *testing.T) {
	tel, sr, _ := sdkTelemetry(t)
	req, _ := http.NewRequest(http.MethodGet, "https://example.test/", nil)
	_, r := tel.StartRequest(context.Background(), req, "https", "example.test", "443")
	r.LeaseGranted(LeaseInfo{HTTP2: true})
	r.Retry(errors.New("refused"))
	r.LeaseGranted(LeaseInfo{})
	r.Failed(errors.New("reset"))
	got := ""
	for _, kv := range sr.Ended()[0].Attributes() {
		if kv.Key == "network.protocol.version" {
			got = kv.Value.AsString()
		}
	}
	if got != "1.1" {
		t.Errorf("network.protocol.version = %q, want 1.1", got)
	}
}
