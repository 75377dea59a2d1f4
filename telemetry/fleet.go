package telemetry

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// FleetRenewal records one renewal of this node with a budget host (fleet
// budgets): how long it took, and its error.type when it failed (ErrorType's
// values; a renewal unanswered after the keeper's timeout is a "timeout").
// The keeper calls it on its own goroutine, through
// actors.FleetKeeperConfig.OnRenewal.
// It never blocks; a nil t records nothing.
func (t *Telemetry) FleetRenewal(took time.Duration, err error) {
	if t == nil || !t.fleetRenewal.Enabled(background) {
		return
	}
	if err == nil {
		t.fleetRenewal.Record(background, took.Seconds())
		return
	}
	typ := ErrorType(err)
	opt, ok := t.fleetFailed.Load(typ)
	if !ok {
		opt, _ = t.fleetFailed.LoadOrStore(typ, metric.WithAttributeSet(attribute.NewSet(semconv.ErrorTypeKey.String(typ))))
	}
	t.fleetRenewal.Record(background, took.Seconds(), opt.(metric.MeasurementOption))
}
