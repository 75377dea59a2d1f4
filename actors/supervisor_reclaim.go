package actors

import (
	"reflect"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/route"
)

// onRouteReclaimed handles a route that reclaimed itself unused
// (route_reclaim.go): the next RouteRequest for its key starts a new route,
// and the route stops once it has answered what its mailbox holds (Poison:
// each lease queued there is refused, and its caller goes to the new route).
// Its Terminated then closes its Done, and the pool drops its handle.
func (s *Supervisor) onRouteReclaimed(ctx actor.Context, m *RouteReclaimed) {
	e := s.byID[m.From.Id]
	if e == nil || e.reclaimed || s.closing {
		return
	}
	e.reclaimed = true
	s.reclaimed++
	if s.routes[e.h.Key] == e {
		delete(s.routes, e.h.Key)
	}
	ctx.Poison(e.h.PID)
}

// minCompact is the fewest route entries at their peak for which the
// supervisor's maps are rebuilt once most of them are gone (compactRoutes).
const minCompact = 1024

// compactRoutes rebuilds the supervisor's maps and lists of routes,
// protoactor's set of its children (compactChildren) and the maps of the
// actor system's process registry (compactRegistry), once their entries have
// fallen below a quarter of their peak: a Go map keeps the memory of its
// largest size, and so does a slice cut short, and a client that called
// 100,000 hosts once would keep megabytes of empty buckets after their routes
// are reclaimed. The rebuild costs a pass over the routes left, at most once
// per three quarters of the peak gone: amortized, a constant per removed
// route.
func (s *Supervisor) compactRoutes(ctx actor.Context) {
	n := len(s.list)
	if s.peakRoutes < minCompact || n >= s.peakRoutes/4 {
		return
	}
	routes := make(map[route.Key]*routeEntry, n)
	byID := make(map[string]*routeEntry, n)
	for _, e := range s.list {
		byID[e.h.PID.Id] = e
		if !e.reclaimed { // a reclaimed route's key is the new route's, if any
			routes[e.h.Key] = e
		}
	}
	s.routes, s.byID, s.hostHeld = routes, byID, copyMap(s.hostHeld)
	if s.resolvers != nil { // the hosts' resolvers (supervisor_endpoints.go): one per host of a route
		s.resolvers, s.resolverHost = copyMap(s.resolvers), copyMap(s.resolverHost)
	}
	s.list = append(make([]*routeEntry, 0, 2*n), s.list...)
	s.holding = append(make([]holder, 0, 2*len(s.holding)), s.holding...) // same order: holdIdx stays right
	s.peakRoutes = n
	compactChildren(ctx)
	if ctx == nil {
		return // a test's supervisor, outside an actor system
	}
	// Off the supervisor's Receive: a pass over the registry's 32,768 shards
	// takes milliseconds, each shard under its own lock.
	sys := ctx.ActorSystem()
	s.cfg.Go(func() { compactRegistry(sys) }) // owned by the client's WaitGroup; ends after one pass
}

// compactChildren rebuilds protoactor's set of the supervisor's children
// (actor.PIDSet: a slice and a Go map from PID to index) at the size of what
// it holds now. protoactor never shrinks it, and it is the biggest part of
// what a client that once had 100,000 routes at the same time would keep
// after they were all reclaimed: about 85 bytes a route at its peak, 8.5 MB.
// protoactor gives no access to the set but its slice (Context.Children), so
// this reaches it inside the actor context (its extras' children field) by
// reflection; childSet returns nil when the pinned protoactor's context is
// not laid out so, and then the set is left as it is
// (TestCompactChildren fails: it checks the layout). Called in the
// supervisor's Receive: protoactor touches the set only on the supervisor's
// own goroutine (Spawn, and the Terminated of a child, both handled there).
func compactChildren(ctx actor.Context) {
	if set := childSet(ctx); set != nil {
		*set = *actor.NewPIDSet(set.Values()...)
	}
}

// childSet returns protoactor's set of ctx's children, or nil when ctx is
// not the actor context the pinned protoactor makes (an *actorContext whose
// extras, once the actor has spawned a child, hold a children PIDSet).
func childSet(ctx actor.Context) *actor.PIDSet {
	v := reflect.ValueOf(ctx)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	extras := v.Elem().FieldByName("extras")
	if !extras.IsValid() || extras.Kind() != reflect.Pointer || extras.IsNil() ||
		extras.Elem().Kind() != reflect.Struct {
		return nil
	}
	set := extras.Elem().FieldByName("children")
	if !set.IsValid() || set.Type() != reflect.TypeFor[actor.PIDSet]() || !set.CanAddr() {
		return nil
	}
	return (*actor.PIDSet)(unsafe.Pointer(set.UnsafeAddr()))
}

// clearStoppedChild clears the slot that protoactor's set of an actor's
// children leaves behind when a child stops: PIDSet.Remove shortens its slice
// without clearing the slot past the new end, which may hold the stopped
// child's PID, and a PID caches a pointer to its process, so the stopped
// route's actor, with all its state, stays reachable until another child
// takes the slot. After 100,000 routes reclaimed, that kept about 80 MB.
// Called in the supervisor's Receive, on a child's Terminated (protoactor
// removes the child from the set just before): the set is the supervisor's
// own, touched only on its goroutine.
func clearStoppedChild(ctx actor.Context) {
	kids := ctx.Children()
	if n := len(kids); n < cap(kids) {
		kids[:n+1][n] = nil
	}
}

// compactRegistry rebuilds the maps of sys's process registry at the size of
// what they hold now, and reports whether it could (false when the pinned
// protoactor's registry is not laid out as registryShardItems expects: then
// it is left as it is, and TestCompactRegistry fails). The registry keeps
// every actor in one of 32,768 Go maps (1,024 concurrent maps of 32 shards,
// by the actor's ID), and a Go map keeps the room of its largest size: the
// first actor a shard holds gives it a group of slots (about 300 bytes) that
// it keeps once empty, and a shard that held more than eight grows a table.
// After 20,000 routes used once and reclaimed, a process that started cold
// kept 7 MB there (net/http's Transport keeps 0.6 MB after the same: see
// TestReclaimedRoutesLeaveNoMoreThanNetHTTP in package client). Each shard is rebuilt under its own
// lock, the one every reader and writer of it takes (protoactor reaches the
// maps only through them), so actors can be spawned, stopped and sent to
// meanwhile, also in a system other clients share. It costs a lock, and a
// map's allocation, per shard (about 10 ms on a loaded 2-core machine),
// which compactRoutes spends, on a goroutine of the client's, at most once
// per three quarters of its routes' peak gone.
func compactRegistry(sys *actor.ActorSystem) bool {
	if sys == nil || sys.ProcessRegistry == nil || sys.ProcessRegistry.LocalPIDs == nil {
		return false
	}
	for _, m := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, shard := range m {
			items := registryShardItems(shard)
			if items == nil {
				return false
			}
			shard.Lock()
			*items = copyMap(*items)
			shard.Unlock()
		}
	}
	return true
}

// registryShardItems returns the map of one shard of the registry's
// concurrent maps (concurrent-map's ConcurrentMapShared: an unexported map
// of the items, guarded by the shard's embedded RWMutex), or nil when the
// shard is not laid out so.
func registryShardItems[S any](shard *S) *map[string]any {
	if shard == nil {
		return nil
	}
	v := reflect.ValueOf(shard).Elem()
	if v.Kind() != reflect.Struct {
		return nil
	}
	items := v.FieldByName("items")
	if !items.IsValid() || items.Type() != reflect.TypeFor[map[string]any]() || !items.CanAddr() {
		return nil
	}
	return (*map[string]any)(unsafe.Pointer(items.UnsafeAddr()))
}

// copyMap copies m into a map sized for what it holds now (maps.Clone keeps
// the size m grew to).
func copyMap[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
