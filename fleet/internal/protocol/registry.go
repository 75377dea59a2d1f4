package protocol

import (
	"slices"
	"sort"
	"strconv"
)

// NodeID names a keeper: one client's side of the fleet budget on one
// member. In the cluster it is the keeper actor's address and id.
type NodeID string

// HostID names a member that hosts ledgers: its actor system's address.
type HostID string

// HostInfo is a ledger host as the registry lists it.
type HostInfo struct {
	ID HostID
	// Lease is the host's session in the coordinator (an etcd lease id): a
	// shard handed to it is bound to it, so that the shard is freed when the
	// host's session ends.
	Lease int64
	// Leaving: the host is handing its shards over (a graceful stop): no
	// shard is placed on it, but it answers for those it still owns.
	Leaving bool
}

// DefaultShards is how many shards the routes are spread over. A shard is
// the unit of ownership: its owner keeps the ledgers of all its routes, and a
// node's renewal to a host carries every route of every shard the host owns.
// So a node sends at most this many renewals per interval (a third of a
// lease), however many routes it uses and however many members the fleet
// has; and a fleet of more members than shards has members that own none.
const DefaultShards = 256

// ShardOf returns the shard of route: FNV-1a of its name, modulo shards. The
// same on every member and every version.
func ShardOf(route string, shards int) int {
	return int(fnv64a(route) % uint64(shards))
}

// fnv64a is FNV-1a over s (hash/fnv's, without its allocation).
func fnv64a(s string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}

// vnodes is how many points each host has on the placement ring: enough that
// shards spread within about a tenth of even over a few hosts.
const vnodes = 64

// Registry is one version of the fleet's members, as the coordinator lists
// them (etcd under the fleet's prefix): the nodes, which the floor divides
// the budget among, and the hosts, which the shards are placed on. It is
// immutable: a change makes a new Registry, and one value may be shared by
// every reader.
type Registry struct {
	Rev   int64 // the coordinator's revision it was read at
	hosts []HostInfo
	nodes map[NodeID]bool
	ring  []ringPoint

	// The difference from prev, the version this one was made from by
	// Next: a reader that holds prev looks at these rather than at every
	// member.
	prev         *Registry
	removedNodes []NodeID
	addedHosts   []HostID
	removedHosts []HostID
}

type ringPoint struct {
	at   uint64
	host int // index in hosts
}

// NewRegistry builds the registry of hosts and nodes at revision rev.
func NewRegistry(rev int64, hosts []HostInfo, nodes []NodeID) *Registry {
	r := &Registry{Rev: rev, hosts: slices.Clone(hosts), nodes: make(map[NodeID]bool, len(nodes))}
	sort.Slice(r.hosts, func(i, j int) bool { return r.hosts[i].ID < r.hosts[j].ID })
	for _, n := range nodes {
		r.nodes[n] = true
	}
	r.ring = make([]ringPoint, 0, len(r.hosts)*vnodes)
	for i, h := range r.hosts {
		if h.Leaving {
			continue
		}
		for v := range vnodes {
			r.ring = append(r.ring, ringPoint{at: hash64(string(h.ID) + "#" + strconv.Itoa(v)), host: i})
		}
	}
	sort.Slice(r.ring, func(i, j int) bool { return r.ring[i].at < r.ring[j].at })
	return r
}

// Next returns the registry at rev: this one with hosts and nodes added and
// removed.
func (r *Registry) Next(rev int64, addHosts []HostInfo, removeHosts []HostID, addNodes, removeNodes []NodeID) *Registry {
	hosts := make([]HostInfo, 0, len(r.hosts)+len(addHosts))
	var gone []HostID
	for _, h := range r.hosts {
		if !slices.Contains(removeHosts, h.ID) {
			hosts = append(hosts, h)
		} else {
			gone = append(gone, h.ID)
		}
	}
	var added []HostID
	for _, h := range addHosts {
		if _, ok := r.Host(h.ID); !ok {
			added = append(added, h.ID)
		}
		hosts = slices.DeleteFunc(hosts, func(o HostInfo) bool { return o.ID == h.ID })
		hosts = append(hosts, h)
	}
	nodes := make([]NodeID, 0, len(r.nodes)+len(addNodes))
	var removed []NodeID
	for n := range r.nodes {
		if slices.Contains(removeNodes, n) {
			removed = append(removed, n)
			continue
		}
		nodes = append(nodes, n)
	}
	slices.Sort(removed)
	nodes = append(nodes, addNodes...)
	next := NewRegistry(rev, hosts, nodes)
	next.prev, next.removedNodes, next.addedHosts, next.removedHosts = r, removed, added, gone
	return next
}

// HostsChangedSince returns the hosts this registry lacks that old had, and
// those it has that old lacked.
func (r *Registry) HostsChangedSince(old *Registry) (removed, added []HostID) {
	if r.prev == old && old != nil {
		return r.removedHosts, r.addedHosts
	}
	for _, h := range old.HostList() {
		if _, ok := r.Host(h.ID); !ok {
			removed = append(removed, h.ID)
		}
	}
	for _, h := range r.hosts {
		if _, ok := old.Host(h.ID); !ok {
			added = append(added, h.ID)
		}
	}
	return removed, added
}

// followHosts brings what a host or a keeper knows of the hosts from old to
// reg: gone gains the hosts reg dropped and loses those it lists again (a
// hint to a dropped host is stale), and hints lose the owners reg does not
// list.
func followHosts(old, reg *Registry, gone map[HostID]bool, hints map[int]HostID) {
	if old != nil {
		removed, added := reg.HostsChangedSince(old)
		for _, id := range removed {
			gone[id] = true
		}
		for _, id := range added {
			delete(gone, id)
		}
	}
	for s, owner := range hints {
		if _, ok := reg.Host(owner); !ok {
			delete(hints, s)
		}
	}
}

// NodesRemovedSince returns the nodes this registry lacks that old had, and
// whether it knows them from its differences (false: compare in full).
func (r *Registry) NodesRemovedSince(old *Registry) ([]NodeID, bool) {
	if r.prev != old || old == nil {
		return nil, false
	}
	return r.removedNodes, true
}

// Nodes lists the registered nodes, sorted.
func (r *Registry) NodeList() []NodeID {
	if r == nil {
		return nil
	}
	out := make([]NodeID, 0, len(r.nodes))
	for n := range r.nodes {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// HostList lists the registered hosts, sorted by id.
func (r *Registry) HostList() []HostInfo {
	if r == nil {
		return nil
	}
	return slices.Clone(r.hosts)
}

func hash64(s string) uint64 {
	// FNV's low bits mix poorly for short keys that differ at the end: a
	// final avalanche (SplitMix64's) spreads them over the ring.
	x := fnv64a(s)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Place returns the host a shard belongs on: the first point of the ring at
// or after the shard's hash (consistent hashing: a host that joins or leaves
// moves only the shards next to its points). It costs O(log hosts); false
// when there is no host.
func (r *Registry) Place(shard int) (HostInfo, bool) {
	return r.placeExcept(shard, "")
}

// PlaceExcept is Place as if host except had left: where a leaving host hands
// its shards.
func (r *Registry) PlaceExcept(shard int, except HostID) (HostInfo, bool) {
	return r.placeExcept(shard, except)
}

func (r *Registry) placeExcept(shard int, except HostID) (HostInfo, bool) {
	if r == nil || len(r.ring) == 0 {
		return HostInfo{}, false
	}
	at := hash64("shard#" + strconv.Itoa(shard))
	i := sort.Search(len(r.ring), func(i int) bool { return r.ring[i].at >= at })
	for range r.ring {
		if i == len(r.ring) {
			i = 0
		}
		if h := r.hosts[r.ring[i].host]; h.ID != except {
			return h, true
		}
		i++
	}
	return HostInfo{}, false
}

// Host returns the host id, if it is registered.
func (r *Registry) Host(id HostID) (HostInfo, bool) {
	if r == nil {
		return HostInfo{}, false
	}
	i := sort.Search(len(r.hosts), func(i int) bool { return r.hosts[i].ID >= id })
	if i < len(r.hosts) && r.hosts[i].ID == id {
		return r.hosts[i], true
	}
	return HostInfo{}, false
}

// Revision returns Rev, or 0 for no registry.
func (r *Registry) Revision() int64 {
	if r == nil {
		return 0
	}
	return r.Rev
}

// Hosts returns the number of hosts.
func (r *Registry) Hosts() int {
	if r == nil {
		return 0
	}
	return len(r.hosts)
}

// Nodes returns the number of nodes: the floor divides the budget by it.
func (r *Registry) Nodes() int {
	if r == nil {
		return 0
	}
	return len(r.nodes)
}

// HasNode reports whether node is registered.
func (r *Registry) HasNode(n NodeID) bool { return r != nil && r.nodes[n] }
