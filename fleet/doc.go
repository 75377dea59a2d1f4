// Package fleet shares a connection budget per route across the nodes of a
// protoactor cluster: N nodes together never hold more than the budget to one
// upstream. Leases stay local: each node holds a share of the
// budget and asks for more, or gives some back, in the background; the
// request path sends no cluster message.
//
// # Parts
//
// The budget grain (Kind, KindName) is a virtual actor, one per route, whose
// identity is the route key as route.Key.String() spells it
// ("http://10.0.0.1:8080"), found through protoactor's disthash identity
// lookup. It divides the route's budget among the nodes that ask, max-min fair
// by demand (a node that waits gets more, an idle one gives back what it does
// not use), and grants each share as a lease of DefaultLease (3 s), in the
// manner of Google's Doorman. Its messages cross the cluster as protobuf
// (google.protobuf.Struct, see wire.go): no generated code.
//
// The keeper (Budget.StartKeeper) is one node's side: an actor in the cluster's actor
// system that learns the node's demand per route from the supervisor
// (actors.UsageReported), asks the route's grain for a share on demand, in blocks,
// and renews every third of a lease, each call on its own goroutine with its
// own deadline (keeperConfig.CallTimeout), and tells the supervisor every change of
// a share (actors.ShareChanged).
//
// # The contract with the supervisor
//
// The supervisor (package actors) speaks to the keeper through
// actors.FleetBudget and three messages, all without reply, all sent with
// actor.Context.Send or RootContext.Send inside one actor system:
//
//   - *actors.UsageReported{Route, Held, Idle, Waiting}: supervisor -> keeper,
//     whenever a route's demand changes: Held = connections open plus dials
//     in flight, Idle = the idle part of Held, Waiting = callers queued for a
//     connection. It costs the supervisor one Send (about 100 ns) and the
//     keeper a few hundred nanoseconds; a supervisor may coalesce.
//   - *actors.ShareChanged{Route, Share, Budget}: keeper -> supervisor,
//     whenever this node's share of a route changes. Every route starts at
//     share 0. The supervisor never lets the route hold more than Share
//     connections (dials count); when Share shrinks it closes idle
//     connections above it and opens none until under it; it never cuts a
//     request in flight.
//   - *actors.SharesRequest{}: supervisor -> keeper, when the supervisor
//     starts or restarted: the keeper sends a ShareChanged for every share
//     above 0.
//
// A route's first connection waits for the first grant: a grain round trip
// (tens of microseconds on the same member, a few hundred across members), or
// up to one lease when the grain is new (see Safe mode).
//
// # Integration into connactor
//
//  1. The embedding service registers Kind() on every member:
//     cluster.Configure(name, provider, disthash.New(), remoteCfg,
//     cluster.WithKinds(fleet.Kind())), starts the member, and gives
//     New(cluster, Options{...}) to client.Config.Fleet. A program that does
//     not import this package links no part of protoactor's cluster.
//  2. client.New runs in the cluster's actor system and starts a keeper
//     (Budget.StartKeeper) before the supervisor, whose PID it names in
//     advance; the supervisor gets the keeper's PID in
//     actors.SupervisorConfig.Fleet. The keeper's OnRenewal feeds the
//     connactor.fleet.renewal.duration histogram.
//  3. The supervisor (actors/supervisor_fleet.go) sends UsageReported when a
//     route's counts change (never per request: permits and closes are
//     reported at once, the idle and waiting counts the routes publish are
//     looked at every 100 ms), grants a route a permit only while it holds
//     less than its share, sheds idle connections above a shrunk share and
//     tells the route RoomWanted so that connections freed with no waiter
//     close. It sends SharesRequest when it starts and after a restart.
//  4. RouteStats.FleetShare and FleetBudget are the supervisor's published
//     last ShareChanged; FleetState, FleetRenewal and Stats.FleetMembers come
//     from the keeper's Snapshot; the connactor.fleet.share gauge reads the
//     published share.
//  5. Close and Shutdown stop the supervisor, whose routes stop first (their
//     sockets closed) and are reported holding nothing, then the keeper,
//     which gives the shares back at once. The client never shuts the
//     cluster down: the service does, after closing the client.
//
// # Safety
//
// The grain keeps, per node, max(grant, the share the node reported it
// enforces, the connections it reported holding), and grants only within the
// budget minus the other nodes' counts. A node shrinks only once it got the
// smaller grant, and the grain counts the old share until the node's next
// request confirms it, so a lost or late answer can only make the grain count
// too much. Nodes count a lease from when they sent the request, less a tenth;
// the grain counts it from when it got it. Answers to calls that a newer call
// overtook are dropped at both ends (sequence numbers).
//
// Safe mode: a grain re-activated on another member (its host died or left;
// its state is lost) may not know leases its previous activation granted. For
// one lease it grants no node more than the lease it reports, or the floor it
// reports enforcing; after that every old lease has expired or been reported.
// So the sum of shares stays within the budget during a move. A new route's
// grain is in safe mode too: the first grant of a route comes up to one lease
// after its first use.
//
// When the cluster cannot be reached, a node keeps its lease until it expires,
// then falls back to Options.Floor (default Budget / members it sees). A node
// that dies gives its share back when its lease expires at the grain (within a
// lease); one that stops with Keeper.Stop gives it back at once.
//
// Limits: floors above 0 trade the budget for availability while the fleet is
// split (the unreachable nodes' floors add to the others' leases); Floor < 0
// keeps the budget at the cost of availability. disthash has no fencing: if
// members disagree on the topology for longer than a lease, two activations
// of one grain can each grant the whole budget. Nodes that ask with different
// budgets get the smallest.
//
// # Tests
//
// sim_test.go runs keepers and grains on a fake clock under message loss,
// reordering, abandoned calls and grain moves, and checks the budget after
// every event. The in-process cluster tests (cluster_test.go: three members,
// each with its own connactor client, one shared upstream and one shared
// socket counter) and BenchmarkRequestPath run only without the race
// detector, as protoactor's cluster has data races of its own (RACES.md):
//
//	go test -count=1 -run '^TestCluster' ./fleet/
//
// The multi-process test (process_test.go) runs with it: its three member
// processes (connactor clients on an etcd cluster) are built without.
package fleet
