package fleettest

import (
	"context"
	"math"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/connactor/connactor/telemetry"
)

// Renewals reads the renewal durations a connactor client records
// (connactor.fleet.renewal.duration), the way an operator's metrics pipeline
// would: give MeterProvider to client.Config.MeterProvider. Its histogram has
// finer buckets than the default (a view), so that quantiles of calls that
// take tens of microseconds mean something. Safe for concurrent use.
type Renewals struct {
	MeterProvider *sdkmetric.MeterProvider
	reader        *sdkmetric.ManualReader
}

// renewalBuckets are the view's bucket bounds, seconds.
var renewalBuckets = []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
	50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10}

// NewRenewals returns a meter provider with a manual reader. Shut
// MeterProvider down when done.
func NewRenewals() *Renewals {
	r := &Renewals{reader: sdkmetric.NewManualReader()}
	view := sdkmetric.NewView(sdkmetric.Instrument{Name: telemetry.MetricFleetRenewal},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: renewalBuckets}})
	r.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader), sdkmetric.WithView(view))
	return r
}

// RenewalStats sum up the renewals so far. P50 and P99 are the upper
// bounds of the buckets that hold those quantiles.
type RenewalStats struct {
	Answered, Failed int
	Mean, P50, P99   time.Duration // of answered calls
	Max              time.Duration // of answered calls
}

// Read collects the calls recorded so far.
func (r *Renewals) Read() RenewalStats {
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		return RenewalStats{}
	}
	var s RenewalStats
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if m.Name != telemetry.MetricFleetRenewal || !ok {
				continue
			}
			for _, dp := range h.DataPoints {
				if _, failed := dp.Attributes.Value("error.type"); failed {
					s.Failed += int(dp.Count)
					continue
				}
				s.Answered += int(dp.Count)
				if dp.Count > 0 {
					s.Mean = seconds(dp.Sum / float64(dp.Count))
				}
				if v, ok := dp.Max.Value(); ok {
					s.Max = seconds(v)
				}
				s.P50, s.P99 = quantile(dp, 0.5), quantile(dp, 0.99)
			}
		}
	}
	return s
}

// quantile is the upper bound of the bucket holding quantile q (the maximum
// for the last, unbounded bucket).
func quantile(dp metricdata.HistogramDataPoint[float64], q float64) time.Duration {
	rank := uint64(math.Ceil(q * float64(dp.Count)))
	var seen uint64
	for i, n := range dp.BucketCounts {
		seen += n
		if seen >= rank && n > 0 {
			if i < len(dp.Bounds) {
				return seconds(dp.Bounds[i])
			}
			v, _ := dp.Max.Value()
			return seconds(v)
		}
	}
	return 0
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
