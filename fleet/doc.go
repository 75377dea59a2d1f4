// Package fleet shares a connection budget per route across the nodes of a
// protoactor cluster: N nodes together never hold more than the budget to one
// upstream. Leases stay local: each node holds a share of the budget and asks
// for more, or gives some back, in the background; the request path sends no
// cluster message. A program that does not import this package links no part
// of protoactor's cluster and no gRPC.
//
// # Use
//
// Every member registers Kind() among its cluster's kinds, starts, makes an
// etcd client (etcdprovider.ClientConfig), and gives New(cluster,
// Options{MaxConnsPerRoute, Etcd}) to client.Config.Fleet. The client runs in the cluster's actor system; it
// never shuts the cluster down: the service does, after closing the client.
//
// # Parts
//
// The ledger of a route is its budget as one member keeps it: the leases
// granted to nodes (a node is one client's keeper). Routes are spread over
// 256 shards by a hash of their name; a shard's owner, a member, keeps the
// ledgers of all its routes in its budget host (an actor named
// connactor-fleet-host on every member). A node renews once per third of a
// lease (3 s) with each host owning shards of its routes: one message
// carries every such route, so a node sends at most 256 renewals per
// interval, whatever the number of its routes or of the members.
//
// A ledger divides the budget max-min fair by need (the connections in use
// plus the callers waiting): needs up to the fair level are met, the others
// get the level, and the units left over go one a node, rotating after a
// turn while others wait, so that when the budget is smaller than the nodes
// that want it every node gets a connection within a bounded time. It keeps
// the needs in Fenwick trees: a renewal costs O(log W), W the largest need,
// whatever the number of holders. A node asks for its need rounded up to
// blocks plus a block of headroom; headroom comes only from budget no need
// asks for. A node whose callers leave needs nothing: its next renewal (at
// most a third of a lease later, or a lease after its last use) gives its
// share back. When a renewal finds the budget taken by holders above the fair
// level, the largest are nudged to renew at once; when units come free, the
// longest-waiting holders are nudged to take them.
//
// # Ownership and safety
//
// etcd is the source of truth; protoactor's membership, which can diverge
// (after an etcd restart members may disagree for a long time), is not
// relied on. Each member has a session in etcd (a lease, kept alive every
// second, Options.SessionTTL, default 5 s) under which it registers its host
// and its nodes. Shards are placed on the registered hosts by consistent
// hashing; a shard's owner takes its key by a transaction that finds no owner
// (compare-and-swap on revisions), bound to its session, with an epoch that
// grows at every change. So at most one host owns a shard at a time,
// whatever the members' views: a host asked about a shard it does not own
// sends the node to the owner. An owner grants only while it can confirm its
// session, and its leases end before the session could have expired, so that
// a host cut off from etcd stops granting before another can take its shards.
// A key the fleet cannot read (another program or version wrote it) is
// never overwritten: nobody knows who grants that shard's budget, so the
// shard stays unowned, its routes without shares, until the key is gone
// (ErrCorruptKey).
//
// A ledger keeps, per node, max(grant, has, held, onFloor): what it granted,
// what the node says it enforces, holds, and uses as its floor. A node grows
// only to its grant and drops below has only once it got the smaller grant,
// which its next renewal confirms; so a reply that is lost or late can only
// make the ledger count too much. Nodes count a lease from when they sent the
// renewal, less a tenth; the host from when it got it.
//
// Moves keep the ledgers: a host that should own a shard by placement (a
// member joined, or one leaves gracefully) gets it by a transfer, a
// transaction that moves the key at the epoch it read, and the ledgers follow
// in a handoff, sent until acknowledged. The shards a leaving member still
// owns when its session ends stay bound to a tombstone lease in etcd until
// its last grants ended. A shard taken over from a member whose session
// ended starts in safe mode for a lease: no node gets more than the lease or
// floor it reports, since leases the member was handed with the shard, and
// floors it vouched for, may still run. A node that leaves the registry
// stays in the ledgers until its last lease and floor ended.
//
// # Floors
//
// A node whose lease ran out may use a floor only while the route's owner
// vouches for it: the owner answered its renewal but cannot confirm its own
// session, so it renews nothing. The floor vouched for is what the ledger
// counts for the node, at most Options.Floor (default the budget divided by
// the nodes registered), and the ledger keeps counting it until the vouch
// ends, a lease after the owner's last confirmation: before another host can
// take the shard over and leave safe mode. So a floor is never used where
// nobody counts it, and floors never add up to more than the budget,
// whatever Options.Floor says.
//
// # When etcd is unreachable
//
// Members keep renewing for up to the session TTL after their last
// keepalive, then owners stop granting; nodes keep the floors their owners
// vouch for for a lease more, then hold nothing until etcd answers again. A
// restarted etcd gives every lease a whole TTL again, so the same members own
// the same shards and the leases resume, if their etcd clients find it again
// within the TTL: give them a short reconnect back-off
// (etcdprovider.ClientConfig), as gRPC's own grows towards two minutes during
// an outage. A member that found etcd too late registers under a new session,
// and its shards are taken over in safe mode. A member cut off from etcd
// while others reach it loses its ledgers and its place after the TTL, and by
// then uses nothing the others do not count. The budget holds throughout; the
// price of a long outage is availability.
//
// # The contract with the supervisor
//
// The supervisor (package actors) speaks to the keeper through
// actors.FleetBudget and three messages, all without reply, inside one actor
// system: *actors.UsageReported (supervisor -> keeper, when a route's counts
// change), *actors.ShareChanged (keeper -> supervisor, when a share changes;
// every route starts at 0) and *actors.SharesRequest (supervisor -> keeper,
// when the supervisor starts or restarted). Close and Shutdown stop the
// supervisor, whose routes stop first (their sockets closed) and are reported
// holding nothing, then the keeper, which gives the shares back at once and,
// the last of its member, hands the member's shards to the others and ends
// its session. A client that starts in the same actor system meanwhile
// waits until that member has left, and its keeper starts a new one.
//
// A host or keeper actor that panics is restarted, as protoactor's default
// supervision does; each restart is logged at WARN with the actor's name and
// the panic's value, and an actor that fails more than 10 times in 10 s is
// stopped and logged at ERROR. A host restarted while its member leaves
// leaves too: the new instance knows none of the shards the failed one was
// handing over, which stay bound to the member's session and go with its
// end (after a lease, as any shard a leaving member still owns).
//
// # Messages
//
// Renewals, replies, nudges and handoffs cross the cluster as the protobuf
// messages generated from fleet/internal/protocol/fleetpb/fleet.proto (make
// proto), which protoactor's remote serializes as it does its own. The
// protocol's logic is plain Go values (fleet/internal/protocol), converted
// and checked at the edge (protocol.Encode and Decode), and driven by the
// actors and by fleet/internal/fleetsim, which runs it on a simulated clock
// and network (make fleet-sim).
//
// # Tests
//
// The protocol's tests and the simulation run everywhere. The in-process
// cluster tests (cluster_test.go: three members, each with its own connactor
// client, one upstream, one etcd) and BenchmarkRequestPath run only without
// the race detector, as protoactor's cluster has data races of its own
// (RACES.md):
//
//	go test -count=1 -run '^TestCluster' ./fleet/
//
// The multi-process tests (process_test.go) run with it: their three member
// processes are built without. The etcd-restart scenario makes one short run
// by default, and N full ones with -fleet.etcdrestarts=N (make
// fleet-etcd-restart runs 20).
package fleet
