package actors

import (
	"net/netip"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// EndpointsWatched is sent by the supervisor to a host's resolver when a
// route to that host starts (or, after a resolver failed, to its successor
// for each route still there). No reply: the resolver sends the route its
// EndpointsResolved, at once when it has resolved the host already, after
// its first lookup otherwise, and after every lookup from then on.
type EndpointsWatched struct{ Route *actor.PID }

// EndpointsUnwatched is sent by the supervisor to a host's resolver when a
// route to that host stopped and others remain (the supervisor stops a
// resolver whose last route stopped). No reply.
type EndpointsUnwatched struct{ Route *actor.PID }

// EndpointsResolved is sent by a host's resolver to each route of the host
// after every lookup, and to a route that starts watching. No reply. Addrs is
// the host's last good set in the resolver's order (nil while no lookup has
// succeeded), At when it was looked up; Err is the last lookup's error (it
// failed, or found no address: the set is the one before), nil when it
// succeeded. From is the resolver, to which the route sends ResolveSoon.
// Every route of the host receives the same message: it is never changed.
type EndpointsResolved struct {
	From  *actor.PID
	Addrs []netip.Addr
	At    time.Time
	Err   error
}

// ResolveSoon is sent by a route to its host's resolver when a dial to one of
// the host's addresses failed to connect: the resolver looks the host up
// again, at once or as soon as a second has passed since its last lookup
// began (the address may have left the host's records). No reply: the answer
// is the next EndpointsResolved.
type ResolveSoon struct{}

// resolveSoon is the one ResolveSoon, never changed.
var resolveSoon = &ResolveSoon{}

// lookedUp is sent to a resolver by the goroutine of its lookup, with the
// lookup's outcome. No reply.
type lookedUp struct {
	addrs []netip.Addr
	err   error
}

// lookupDue is sent to a resolver by its timer: the next lookup is due. Gen
// tells a timer the resolver has since replaced (it is ignored).
type lookupDue struct{ gen uint64 }
