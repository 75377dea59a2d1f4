package limit

import "errors"

// ErrInvalidConfig is returned (wrapped with the detail) by New for a Config
// it refuses.
var ErrInvalidConfig = errors.New("limit: invalid config")
