package client

import (
	"context"
	"net/netip"
)

// Resolver looks up the addresses of a host name (Config.Resolver):
// *net.Resolver is one, and tests inject their own. network is "ip"; the
// lookup must return when ctx ends (it is bounded by DialTimeout, and by
// Close). The client looks each host up in the background, never on a
// request's path.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}
