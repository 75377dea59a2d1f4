package hedge

import "errors"

// ErrInvalidPolicy is returned (wrapped, with the field at fault) by
// Policy.Validate for a policy out of range.
var ErrInvalidPolicy = errors.New("hedge: invalid policy")
