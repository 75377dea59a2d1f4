package codel

import "errors"

// ErrInvalidConfig is returned (wrapped with the detail) by New for a target
// or interval it refuses.
var ErrInvalidConfig = errors.New("codel: invalid config")
