package protocol

import (
	"testing"
	"time"
)

const routeA = "http://10.0.0.1:80"

// A route's first connection comes with the first answer of its shard's
// owner (one round trip), not after a safe mode: a shard that never had an
// owner has no earlier grants to wait out.
func TestANewRouteGetsItsShareAtTheFirstAnswer(t *testing.T) {
	f := newFleet(t, 2, 3, 12)
	f.want("n0", routeA, 5)
	f.run(50*time.Millisecond, nil) // one tick: the renewal, the acquisition, the nudge, the renewal again
	if got := f.shares["n0"][routeA]; got < 5 {
		t.Fatalf("after one tick the new route's share is %d, want its demand of 5", got)
	}
	// The others join. The first takes what is free; the second finds the
	// budget taken, and the nodes above their fair part are nudged to shrink
	// at once: it gets its first connections a few exchanges later (ticks of
	// this test), not at the others' next renewals.
	f.want("n1", routeA, 8)
	f.want("n2", routeA, 8)
	f.run(150*time.Millisecond, f.within(routeA, 12))
	if a, b := f.shares["n1"][routeA], f.shares["n2"][routeA]; a == 0 || b == 0 {
		t.Fatalf("newcomers' shares after three ticks: %d and %d, want both above 0", a, b)
	}
	// Within a lease every node holds its max-min fair share: 4 each.
	f.run(DefaultLease, f.within(routeA, 12))
	f.expectEach(routeA, 4, "after a lease (12 shared by three busy nodes)")
}

// Two hosts whose registries disagree both think a shard belongs to them
// (two activations of one ledger, as disthash made while members' views of
// the cluster diverged). Ownership is taken by compare-and-swap: one owns
// it, the other sends the nodes to it, and together the nodes never hold
// more than the budget.
func TestHostsThatDisagreeOnPlacementNeverBothGrant(t *testing.T) {
	f := newFleet(t, 2, 4, 8)
	shard := ShardOf(routeA, DefaultShards)
	// Each host has only ever seen a registry in which it is the only host
	// (the other's registration has not reached it): each places the shard
	// on itself. The nodes are split the same way.
	for i, h := range []HostID{"h0", "h1"} {
		own := NewRegistry(int64(10+i), []HostInfo{{ID: h, Lease: int64(i + 1)}}, f.reg.NodeList())
		f.hosts[h] = NewHost(HostConfig{ID: h}, hostSink{f, h})
		f.hosts[h].Confirmed(int64(i+1), t0.Add(time.Hour))
		f.hosts[h].SetRegistry(own, f.now)
		for _, n := range []NodeID{NodeID("n" + string(rune('0'+2*i))), NodeID("n" + string(rune('1'+2*i)))} {
			f.nodes[n] = NewKeeper(KeeperConfig{Node: n, Budget: 8}, keeperSink{f, n})
			f.nodes[n].SetRegistry(own, f.now)
		}
	}
	for _, n := range f.order {
		f.want(n, routeA, 8) // each alone would take the whole budget
	}
	f.run(3*DefaultLease, f.within(routeA, 8))
	owner := f.owners[shard]
	for _, n := range f.order {
		if f.held[n][routeA] == 0 {
			t.Errorf("%s holds nothing: the nodes placed on the other host were not sent to the owner %s", n, owner)
		}
	}
	if got := f.total(routeA); got != 8 {
		t.Errorf("the nodes hold %d, want the whole budget of 8", got)
	}
}

// A node whose callers leave gives its share back at its next renewal, and
// the others take it within two leases, however long idle connections
// would be kept.
func TestAnIdleNodesShareGoesToTheOthersWithinTwoLeases(t *testing.T) {
	f := newFleet(t, 1, 3, 12)
	for _, n := range f.order {
		f.want(n, routeA, 12)
	}
	f.run(DefaultLease, f.within(routeA, 12))
	if got := f.held["n0"][routeA]; got != 4 {
		t.Fatalf("n0 holds %d before it goes idle, want 4", got)
	}
	f.want("n0", routeA, 0)
	stopped := f.now
	var took time.Duration
	f.run(3*DefaultLease, func() {
		f.within(routeA, 12)()
		if took == 0 && f.held["n1"][routeA] == 6 && f.held["n2"][routeA] == 6 {
			took = f.now.Sub(stopped)
		}
	})
	if took == 0 || took > 2*DefaultLease {
		t.Fatalf("the others held 6 each %v after n0 went idle, want within two leases", took)
	}
	t.Logf("the idle node's share was shared out %v after its callers left", took)
}

// A node renews each host once per interval, whatever the number of its
// routes on that host: one message carries them all.
func TestANodeRenewsEachHostOncePerIntervalForAllItsRoutes(t *testing.T) {
	f := newFleet(t, 1, 1, 100)
	for i := range 100 {
		f.want("n0", "http://10.0.1."+itoa(i)+":80", 1)
	}
	f.run(DefaultLease, nil) // settle: new routes, their grants
	before := f.sent["n0"]
	f.run(3*DefaultLease, nil)
	if n := f.sent["n0"] - before; n > 10 {
		t.Errorf("%d renewals in three leases for 100 routes on one host, want about one a third of a lease (9)", n)
	}
	for i := range 100 {
		if f.held["n0"]["http://10.0.1."+itoa(i)+":80"] != 1 {
			t.Fatalf("route %d is not served", i)
		}
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// A host that cannot confirm its session with the coordinator (etcd is out
// of its reach) stops renewing: its grants end before its session could have
// expired and another host taken its shards over. The nodes keep their
// floor for a lease more, then hold nothing.
func TestAHostThatCannotConfirmItsSessionStopsGranting(t *testing.T) {
	f := newFleet(t, 1, 3, 12)
	for _, n := range f.order {
		f.want(n, routeA, 12)
	}
	f.run(DefaultLease, f.within(routeA, 12))
	until := f.now.Add(2 * time.Second)
	f.hosts["h0"].confirmedUntil = until // the last keepalive the host could send
	f.run(time.Second, f.within(routeA, 12))
	if got := f.total(routeA); got != 12 {
		t.Fatalf("before its session is in doubt the host still grants: %d held, want 12", got)
	}
	f.run(2*time.Second, f.within(routeA, 12))
	for _, n := range f.order {
		if got := f.shares[n][routeA]; got != 4 {
			t.Errorf("%s: share %d once the host is fenced, want its floor 4 (12 / 3 nodes)", n, got)
		}
	}
	f.run(DefaultLease, f.within(routeA, 12))
	if got := f.total(routeA); got != 0 {
		t.Errorf("a lease after the host's session could have expired, the nodes hold %d, want 0", got)
	}
}

// routeOn returns a route whose shard reg places on host.
func routeOn(t *testing.T, reg *Registry, host HostID) string {
	for i := range 10000 {
		r := "http://10.0.2." + itoa(i) + ":80"
		if p, _ := reg.Place(ShardOf(r, DefaultShards)); p.ID == host {
			return r
		}
	}
	t.Fatalf("no route placed on %s", host)
	return ""
}

// A host that joins takes the shards that now belong on it from their
// owner, with their ledgers (a handoff): no safe mode, the budget holds
// throughout, and a node new to the route gets its share at once.
func TestAShardThatMovesToANewHostKeepsItsLedgers(t *testing.T) {
	f := newFleet(t, 2, 3, 12)
	alone := NewRegistry(2, []HostInfo{{ID: "h0", Lease: 1}}, f.reg.NodeList())
	route := routeOn(t, f.reg, "h1") // belongs on h1 once both are registered
	f.hosts["h0"].SetRegistry(alone, f.now)
	f.hosts["h1"].SetRegistry(alone, f.now)
	for _, n := range f.order {
		f.nodes[n].SetRegistry(alone, f.now)
	}
	f.want("n0", route, 12)
	f.want("n1", route, 12)
	f.run(DefaultLease, f.within(route, 12))
	shard := ShardOf(route, DefaultShards)
	if f.owners[shard] != "h0" {
		t.Fatalf("the shard is owned by %q, want h0 (the only host)", f.owners[shard])
	}
	both := NewRegistry(3, f.reg.HostList(), f.reg.NodeList())
	for _, h := range f.hosts {
		h.SetRegistry(both, f.now)
	}
	for _, n := range f.order {
		f.nodes[n].SetRegistry(both, f.now)
	}
	f.run(2*DefaultLease, f.within(route, 12))
	if f.owners[shard] != "h1" {
		t.Fatalf("after the new host settled the shard is owned by %q, want h1", f.owners[shard])
	}
	f.want("n2", route, 12)
	f.run(200*time.Millisecond, f.within(route, 12))
	_, routes := f.nodes["n2"].Snapshot(f.now)
	if len(routes) != 1 || routes[0].Share == 0 || routes[0].Safe {
		t.Fatalf("a node new to the moved route: %+v, want a share at once, not in safe mode", routes)
	}
	f.run(DefaultLease, f.within(route, 12))
	f.expectEach(route, 4, "after the move")
}

// A host that dies takes its ledgers with it. Once the coordinator drops
// its session, another host takes its shards over, in safe mode for a
// lease: the dead host's own leases have ended (it granted none beyond its
// session), but those it was handed with the shard and the floors it
// vouched for may still run without a word to the new owner, so it grants
// nobody more than it has or uses. Then the shares are fair again.
func TestAShardTakenOverFromADeadHostStartsInSafeMode(t *testing.T) {
	f := newFleet(t, 2, 3, 12)
	route := routeOn(t, f.reg, "h0")
	shard := ShardOf(route, DefaultShards)
	f.want("n0", route, 12)
	f.want("n1", route, 12)
	f.run(DefaultLease, f.within(route, 12))
	f.cut["h0"] = true // h0 dies
	f.run(time.Second, f.within(route, 12))
	// Its session expires: its keys go, and the registry drops it.
	delete(f.owners, shard)
	without := NewRegistry(2, []HostInfo{{ID: "h1", Lease: 2}}, f.reg.NodeList())
	f.hosts["h1"].SetRegistry(without, f.now)
	for _, n := range f.order {
		f.nodes[n].SetRegistry(without, f.now)
	}
	f.want("n2", route, 12) // a newcomer meanwhile
	f.run(500*time.Millisecond, f.within(route, 12))
	if f.owners[shard] != "h1" {
		t.Fatalf("the shard is owned by %q, want h1", f.owners[shard])
	}
	_, routes := f.nodes["n2"].Snapshot(f.now)
	if len(routes) != 1 || routes[0].Share != 0 || !routes[0].Safe {
		t.Fatalf("the newcomer on the taken-over shard: %+v, want nothing from a ledger in safe mode", routes)
	}
	f.run(2*DefaultLease, f.within(route, 12))
	f.expectEach(route, 4, "after safe mode")
}

// A shard handed to a host with its ledgers carries leases granted by the
// host before: they may outlive the receiver, if its session ends at once.
// The host that takes the shard over then must not grant them again, not
// even as a floor, while they may run.
func TestLeasesHandedToAHostThatDiesStillCountAfterTheTakeover(t *testing.T) {
	reg := NewRegistry(1, []HostInfo{{ID: "a", Lease: 1}, {ID: "b", Lease: 2}, {ID: "c", Lease: 3}}, []NodeID{"n0", "n1", "n2"})
	var sink nullSink
	hosts := map[HostID]*Host{}
	for i, id := range []HostID{"a", "b", "c"} {
		hosts[id] = NewHost(HostConfig{ID: id}, &sink)
		hosts[id].SetRegistry(reg, t0)
		hosts[id].Confirmed(int64(i+1), t0.Add(time.Hour))
	}
	route := routeOn(t, reg, "c") // c keeps it once it has it
	shard := ShardOf(route, DefaultShards)
	now := t0
	hosts["a"].Acquired(shard, 1, false, now)
	rep := hosts["a"].HandleRenew(Renew{Node: "n0", Seq: 1, Budget: 12, Entries: []Entry{{Route: route, Need: 12, Want: 12}}}, now)
	if g := rep.Grants[0]; g.Status != StatusOK || g.Grant != 12 {
		t.Fatalf("n0's first renewal: %+v, want all 12", g)
	}
	leaseEnd := now.Add(rep.Lease)
	// a hands the shard to b, which dies as soon as it has the ledgers.
	now = now.Add(100 * time.Millisecond)
	hosts["a"].Transferred([]int{shard}, []uint64{1}, []uint64{2}, HostInfo{ID: "b", Lease: 2}, now)
	hosts["b"].ReceiveHandoff(sink.handoffs[0], now)
	hosts["b"].SessionLost()
	// c takes the shard over, and n1 asks for all of it while n0's lease runs.
	now = now.Add(100 * time.Millisecond)
	hosts["c"].Acquired(shard, 3, true, now)
	for now.Before(leaseEnd) {
		rep := hosts["c"].HandleRenew(Renew{Node: "n1", Seq: uint64(now.Sub(t0)), Budget: 12,
			Entries: []Entry{{Route: route, Need: 12, Want: 12}}}, now)
		if g := rep.Grants[0]; g.Grant > 0 {
			t.Fatalf("at %v, while n0's lease of 12 from a runs, c granted n1 %+v", now.Sub(t0), g)
		}
		hosts["c"].Tick(now)
		now = now.Add(100 * time.Millisecond)
	}
	now = now.Add(DefaultLease)
	hosts["c"].Tick(now)
	rep = hosts["c"].HandleRenew(Renew{Node: "n1", Seq: uint64(now.Sub(t0)), Budget: 12,
		Entries: []Entry{{Route: route, Need: 12, Want: 12}}}, now)
	if g := rep.Grants[0]; g.Grant != 12 {
		t.Fatalf("once every earlier lease ended, n1 got %+v, want all 12", g)
	}
}

// nullSink records the handoffs a host sends and the nodes it nudges, and
// counts its acquisitions.
type nullSink struct {
	handoffs []Handoff
	nudged   []NodeID
	acquired int
}

func (s *nullSink) Nudge(n NodeID, _ Nudge)            { s.nudged = append(s.nudged, n) }
func (s *nullSink) Acquire(int)                        { s.acquired++ }
func (s *nullSink) Transfer([]int, []uint64, HostInfo) {}
func (s *nullSink) SendHandoff(_ HostID, h Handoff)    { s.handoffs = append(s.handoffs, h) }
func (s *nullSink) SendHandoffAck(HostID, HandoffAck)  {}

// A transfer binds a shard to the receiver's session. A receiver whose
// session expired (its keys, that shard's among them, went with it) and that
// opened a new one owns nothing by the transfer's handoff when it comes
// late, as the sender resends it until acknowledged: another host may own the
// shard by then, and both would grant.
func TestAHandoffToAnEndedSessionOwnsNothing(t *testing.T) {
	reg := NewRegistry(1, []HostInfo{{ID: "a", Lease: 1}, {ID: "b", Lease: 2}}, []NodeID{"n0"})
	var sink nullSink
	a, b := NewHost(HostConfig{ID: "a"}, &sink), NewHost(HostConfig{ID: "b"}, &sink)
	a.SetRegistry(reg, t0)
	b.SetRegistry(reg, t0)
	a.Confirmed(1, t0.Add(time.Hour))
	b.Confirmed(2, t0.Add(time.Hour))
	route := routeOn(t, reg, "b")
	shard := ShardOf(route, DefaultShards)
	a.Acquired(shard, 1, false, t0)
	a.Transferred([]int{shard}, []uint64{1}, []uint64{2}, HostInfo{ID: "b", Lease: 2}, t0)
	b.SessionLost()
	b.Confirmed(3, t0.Add(time.Hour)) // b's new session
	b.ReceiveHandoff(sink.handoffs[0], t0)
	rep := b.HandleRenew(Renew{Node: "n0", Seq: 1, Budget: 8, Entries: []Entry{{Route: route, Need: 8, Want: 8}}}, t0)
	if g := rep.Grants[0]; g.Status == StatusOK {
		t.Fatalf("b granted %+v on a shard bound to its ended session", g)
	}
	if b.Owned() != 1 || sink.acquired != 1 {
		t.Fatalf("b owns %d shards and asked for %d, want the shard asked for anew (1, 1)", b.Owned(), sink.acquired)
	}
}

// A transfer's answer can come after the session it was asked under is lost
// (the shards went with it) and the host took a shard again, at a new epoch:
// the answer, Transferred or TransferFailed with lost, is about the old
// ownership and must leave the new one alone.
func TestAStaleTransferAnswerLeavesAShardTakenAgainAlone(t *testing.T) {
	reg := NewRegistry(1, []HostInfo{{ID: "a", Lease: 1}, {ID: "b", Lease: 2}}, []NodeID{"n0"})
	route := routeOn(t, reg, "a")
	shard := ShardOf(route, DefaultShards)
	for _, answer := range []string{"Transferred", "TransferFailed lost"} {
		var sink nullSink
		a := NewHost(HostConfig{ID: "a"}, &sink)
		a.SetRegistry(reg, t0)
		a.Confirmed(1, t0.Add(time.Hour))
		a.Acquired(shard, 1, false, t0)
		// The transfer of the shard at epoch 1 is under way when the
		// session is lost; a new session takes the shard again, at 2.
		a.SessionLost()
		a.Confirmed(3, t0.Add(time.Hour))
		a.Acquired(shard, 2, true, t0)
		switch answer {
		case "Transferred":
			a.Transferred([]int{shard}, []uint64{1}, []uint64{2}, HostInfo{ID: "b", Lease: 2}, t0)
		default:
			a.TransferFailed([]int{shard}, []uint64{1}, true, t0)
		}
		if a.Owned() != 1 || len(sink.handoffs) != 0 {
			t.Errorf("%s at epoch 1: a owns %d shards and sent %d handoffs, want the shard taken at 2 kept (1, 0)",
				answer, a.Owned(), len(sink.handoffs))
			continue
		}
		now := t0.Add(DefaultLease) // safe mode over
		rep := a.HandleRenew(Renew{Node: "n0", Seq: 1, Budget: 8, Entries: []Entry{{Route: route, Need: 8, Want: 8}}}, now)
		if g := rep.Grants[0]; g.Status != StatusOK || g.Epoch != 2 || g.Grant != 8 {
			t.Errorf("%s at epoch 1: a answered %+v, want all 8 at epoch 2", answer, g)
		}
	}
}

// The answer to a transfer asked at the shard's current epoch is applied:
// Transferred hands the ledgers over, TransferFailed lost drops the shard,
// TransferFailed not lost makes a moving shard owned again.
func TestATransferAnswerAtTheCurrentEpochIsApplied(t *testing.T) {
	reg := NewRegistry(1, []HostInfo{{ID: "a", Lease: 1}, {ID: "b", Lease: 2}}, []NodeID{"n0"})
	route := routeOn(t, reg, "a")
	shard := ShardOf(route, DefaultShards)
	for _, tc := range []struct {
		answer  string
		owned   int
		handoff int
	}{{"Transferred", 0, 1}, {"TransferFailed lost", 0, 0}, {"TransferFailed", 1, 0}} {
		var sink nullSink
		a := NewHost(HostConfig{ID: "a"}, &sink)
		a.SetRegistry(reg, t0)
		a.Confirmed(1, t0.Add(time.Hour))
		a.Acquired(shard, 4, false, t0)
		switch tc.answer {
		case "Transferred":
			a.Transferred([]int{shard}, []uint64{4}, []uint64{5}, HostInfo{ID: "b", Lease: 2}, t0)
		case "TransferFailed lost":
			a.TransferFailed([]int{shard}, []uint64{4}, true, t0)
		default:
			a.TransferFailed([]int{shard}, []uint64{4}, false, t0)
		}
		if a.Owned() != tc.owned || len(sink.handoffs) != tc.handoff {
			t.Fatalf("%s at epoch 4: a owns %d shards and sent %d handoffs, want %d and %d",
				tc.answer, a.Owned(), len(sink.handoffs), tc.owned, tc.handoff)
		}
		if tc.handoff == 1 && (sink.handoffs[0].Epoch != 5 || sink.handoffs[0].Shard != shard) {
			t.Fatalf("the handoff %+v, want shard %d at epoch 5", sink.handoffs[0], shard)
		}
	}
}

// A member that has just joined gets renewals before it can answer for its
// shards: before its first registry, or before its session is confirmed. It
// tells the nodes to ask again later, and nudges them as soon as it can
// answer, so that a new route does not wait out their RetryAfter.
func TestAHostThatJoinsNudgesTheNodesItCouldNotAnswerYet(t *testing.T) {
	reg := NewRegistry(1, []HostInfo{{ID: "b", Lease: 2}}, []NodeID{"n0", "n1"})
	route := routeOn(t, reg, "b")
	var sink nullSink
	b := NewHost(HostConfig{ID: "b"}, &sink)
	renew := func(n NodeID, seq uint64) Grant {
		rep := b.HandleRenew(Renew{Node: n, Seq: seq, Budget: 8, Entries: []Entry{{Route: route, Need: 1, Want: 2}}}, t0)
		return rep.Grants[0]
	}
	if g := renew("n0", 1); g.Status != StatusMoving || g.RetryAfter == 0 {
		t.Fatalf("with no registry the host answered %+v, want StatusMoving with a RetryAfter", g)
	}
	b.SetRegistry(reg, t0)
	if g := renew("n1", 1); g.Status != StatusMoving || g.RetryAfter == 0 {
		t.Fatalf("with no session the host answered %+v, want StatusMoving with a RetryAfter", g)
	}
	if len(sink.nudged) != 0 || sink.acquired != 0 {
		t.Fatalf("before its session the host nudged %v and asked for %d shards, want nothing", sink.nudged, sink.acquired)
	}
	b.Confirmed(2, t0.Add(time.Hour))
	if len(sink.nudged) != 2 || sink.nudged[0] != "n0" || sink.nudged[1] != "n1" {
		t.Fatalf("once its session was confirmed the host nudged %v, want n0 and n1", sink.nudged)
	}
	if g := renew("n0", 2); g.Status != StatusMoving || sink.acquired != 1 {
		t.Fatalf("the nudged node's renewal got %+v with %d acquisitions, want the shard asked for", g, sink.acquired)
	}
	b.Confirmed(2, t0.Add(2*time.Hour))
	if len(sink.nudged) != 2 {
		t.Fatalf("a later confirmation nudged %v again, want each parked node nudged once", sink.nudged)
	}
}

// keeperLog records the renewals a keeper sends.
type keeperLog struct{ sent []Renew }

func (s *keeperLog) Send(_ HostID, r Renew)               { s.sent = append(s.sent, r) }
func (s *keeperLog) ShareChanged(string, int, int)        {}
func (s *keeperLog) Renewed(HostID, time.Duration, error) {}

// A renewal held back by MinGap is due when the gap ends: NextWake says
// when, so that a driver that ticks coarsely sends it then, not at its next
// tick.
func TestAKeeperSaysWhenARenewalHeldBackBecomesDue(t *testing.T) {
	reg := NewRegistry(1, []HostInfo{{ID: "h0", Lease: 1}}, []NodeID{"n0"})
	var sink keeperLog
	k := NewKeeper(KeeperConfig{Node: "n0", Budget: 12}, &sink)
	k.SetRegistry(reg, t0)
	k.Usage(routeA, 0, 0, 1, t0)
	k.Tick(t0)
	if len(sink.sent) != 1 {
		t.Fatalf("a new route sent %d renewals, want 1", len(sink.sent))
	}
	k.HandleReply(RenewReply{Host: "h0", Seq: sink.sent[0].Seq, Lease: DefaultLease,
		Grants: []Grant{{Status: StatusOK, Grant: 2, Budget: 12}}}, t0.Add(time.Millisecond))
	// The demand grows past the grant 2 ms after the renewal left: the
	// next one may leave once MinGap has passed since.
	at := t0.Add(2 * time.Millisecond)
	k.Usage(routeA, 2, 0, 5, at)
	k.Tick(at)
	gapEnd := t0.Add(k.Config().MinGap)
	if len(sink.sent) != 1 {
		t.Fatalf("a renewal left within MinGap of the last")
	}
	if w := k.NextWake(); !w.Equal(gapEnd) {
		t.Fatalf("NextWake %v after the renewal, want the end of MinGap, %v", w.Sub(t0), gapEnd.Sub(t0))
	}
	k.Tick(gapEnd)
	if len(sink.sent) != 2 || sink.sent[1].Entries[0].Need != 7 {
		t.Fatalf("at the end of MinGap the keeper sent %+v, want a renewal needing 7", sink.sent[1:])
	}
}
