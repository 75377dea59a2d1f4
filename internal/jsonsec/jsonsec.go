// Package jsonsec encodes durations in JSON as a number of seconds (a float),
// the unit the status page and its readers use, where encoding/json would
// write time.Duration's nanoseconds.
package jsonsec

import (
	"encoding/json"
	"time"
)

// Duration is a time.Duration that JSON sees in seconds.
type Duration time.Duration

// MarshalJSON writes d in seconds.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).Seconds()) }

// UnmarshalJSON reads a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s float64
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*d = Duration(s * float64(time.Second))
	return nil
}
