// Package actors is connactor's connection pool: the actors that own its
// state, and Pool, the callers' half of their protocol (the client's
// RoundTrip is a Call on a Pool).
//
// Three kinds of actor share the work. The supervisor (one per pool) starts a
// route actor per route and supervises it, enforces MaxConnsTotal and
// MaxConnsPerHost (connection permits, LRU eviction across routes), runs idle
// and lifetime expiry, and keeps routes within their fleet shares. A route
// actor (one per route key: scheme, host, port, proxy, identity) owns that
// route's connections, idle list and FIFO of waiting callers, and enforces
// MaxConnsPerRoute. A connection actor (conn.Actor, one per socket, a child of
// its route) dials and does the I/O with net/http's machinery. Their mailboxes
// are inline-first (internal/mailbox): a message to an idle actor runs on the
// sender's goroutine, so most hops below cost no goroutine switch.
//
// # The life of a request
//
// Each hop: who sends what to whom, and on which goroutine. "caller" is the
// goroutine in RoundTrip; "reader" is whichever goroutine reads the response
// body to its end or closes it.
//
//	caller                Call.Admit: one of MaxConcurrentRequests (an atomic;
//	                      a ticket in the semaphore's FIFO when full)
//	caller -> supervisor  RouteRequest, on a route's first use only (the pool
//	                      keeps the route's handle until its Done closes)
//	caller                takes an idle HTTP/1.1 connection on offer in the
//	                      route's outbox (a non-blocking receive: no
//	                      message), or else:
//	caller -> route       LeaseRequest: at once from the idle list or a free
//	                      HTTP/2 stream, or the caller waits in the FIFO while
//	  route -> supervisor   PermitRequest: the route may grow
//	  supervisor -> route   PermitGranted (first, perhaps, EvictIdleRequest to
//	                        the route with the least recently used idle
//	                        connection, answered IdleEvicted; or RoomWanted)
//	  route -> conn         spawn, or DialRequest to a spare actor
//	  conn -> route         Dialed, from the dial's goroutine
//	  route                 grants the oldest waiter that can take it
//
// HTTP/1.1, one request at a time on a connection:
//
//	caller -> conn        ExchangeRequest: the request is written and the
//	                      response head read on the caller's goroutine (the
//	                      connection actor's inline mailbox)
//	reader                the body's end calls the exchange's conn.Ender
//	reader -> route       Released: the connection goes to the next waiter,
//	                      or idle (route -> conn: WatchIdle; the route may
//	                      offer it in its outbox), or closes
//	                      (route -> supervisor: ConnClosed; route -> conn:
//	                      RecycleRequest, answered Recycled, or a stop)
//
// HTTP/2, streams on a shared connection:
//
//	caller                h2.Conn.RoundTrip on the caller's goroutine; the
//	                      connection's read loop delivers the response head
//	reader                the body's end calls the exchange's h2.Ender
//	reader -> route       Released: the stream is free for the next waiter
//	conn -> route         StreamsChanged, DrainStarted, H2Closed: the
//	                      connection's own news, from its event goroutine
//
// A caller that gives up (its context, LeaseTimeout) cancels its ticket and
// sends LeaseCancelled: the route drops it from the FIFO and takes back a
// lease that crossed the cancel. Replays (a stale re-used HTTP/1.1
// connection, a refused HTTP/2 stream) are new attempts of the same Call
// (Exchange.Replay says which are safe). So are hedged attempts
// (pool_hedge.go): the caller races them on goroutines of its own and asks
// the route for each with a LeaseRequest carrying a HedgeAsk, which the
// route serves or refuses at once (route_hedge.go).
//
// # Requests and events
//
// A goroutine that waits for an answer puts a wait.Ticket in its request; the
// actor answers through it exactly once (Deliver or Reject), and a waiter
// that gave up takes back what crossed its cancel in one place. These are
// the requests, with their answers:
//
//	RouteRequest          supervisor: the route's handle
//	LeaseRequest          route: a Lease (or the dial's error, a policy's; for
//	                      a hedged attempt, a HedgeRefused at once)
//	conn.ExchangeRequest  connection: the response head
//	StatsRequest          supervisor: its counts and its routes
//	RouteStatsRequest     route: its snapshot (route.Stats)
//	CloseIdleRequest      route: how many idle connections it closed
//
// An actor waits for nothing: what it asks of another actor is answered by an
// event sent to it, handled like any other message:
//
//	PermitRequest         PermitGranted, when MaxConnsTotal allows
//	EvictIdleRequest      IdleEvicted
//	conn.DialRequest      conn.Dialed
//	conn.RecycleRequest   conn.Recycled (or the actor stops itself)
//
// Everything else is an event, with no reply: LeaseCancelled, Released,
// HedgeWon, OfferDeclined, PermitReturned, ConnClosed, RoomWanted, ExpiryTicked,
// LongWaitNoticed, conn.WatchIdle, conn.IdleBroken, conn.StreamsChanged,
// conn.DrainStarted, conn.H2Closed, the endpoints' EndpointsWatched,
// EndpointsUnwatched, EndpointsResolved and ResolveSoon, and the fleet
// budget's shares (ShareChanged to the supervisor, FleetShareTold to a
// route). The end of a response body is told by a callback
// (conn.Ender, h2.Ender) on the reader's goroutine, which releases the lease
// with Released at once: no actor waits for it.
//
// # Endpoints
//
// A route to a host name dials the addresses the host resolves to, which a
// resolver actor per host (a child of the supervisor) keeps, off the request
// path:
//
//	supervisor -> resolver  EndpointsWatched, when a route of the host starts
//	                        (EndpointsUnwatched when it stops; the host's last
//	                        route stops its resolver)
//	resolver -> route       EndpointsResolved, after each lookup (every
//	                        DNSRefresh): the set, or the last good one
//	route -> resolver       ResolveSoon, when a dial fails to connect
//
// The route picks each dial's address (conn.DialRequest.To) from its
// endpoint set and drains the addresses that leave it (endpoints.go).
//
// # Ownership
//
// All of an actor's state is touched only inside its Receive. What leaves it
// does so in one of these ways, each with its rule:
//
//   - A ticket (wait.Ticket) is answered exactly once, by the actor that
//     holds the request; a waiter that gives up cancels it, and what crossed
//     the cancel goes back to the actor by message (LeaseCancelled).
//   - Published counters (routePublished, fleetPublished) have one writer,
//     the actor, and readers that only look (the supervisor's ticks, the
//     gauges, a route's limit reading its fleet share); a decision taken
//     on them is checked again by message.
//   - A connection's socket reader and writer are lent to a response body or
//     a request writer between an exchange's answer and its end (see conn).
//   - The route's outbox: a buffered channel that only the route sends to,
//     holding a few idle HTTP/1.1 connections while nobody waits in its FIFO.
//     Its rules are written once, on the outbox type (route_outbox.go).
//
// A wait selects on nothing but its own ticket, its request's context and its
// timer: never on a channel that every waiter shares, whose lock each park
// and wake of every waiter would take. Whoever ends a queue answers every
// ticket in it:
//
//   - the admission queue: Pool.Close (wait.Semaphore.Close);
//   - a route's FIFO: the route's Stopping, whatever stops it (Close, its own
//     failure, the supervisor's), which also answers the request it failed
//     on;
//   - requests still in an actor's mailbox, or posted after the actor
//     stopped: the mailbox, which the actor closes when it has stopped
//     (internal/mailbox's Close). Callers post to the mailbox itself, not to
//     the actor's PID (which protoactor forgets when the actor stops), and the
//     mailbox outlives the actor: the supervisor makes each route's and keeps
//     it in the route's handle, the pool makes the supervisor's, which
//     survives its restarts, and a connection actor's travels in its Dialed;
//   - the RouteRequest the supervisor failed on: the failed instance, as it
//     restarts (ErrSupervisorFailed);
//   - an exchange: its connection actor, whose Stopping answers the one it
//     failed on.
package actors
