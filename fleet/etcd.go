package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/connactor/connactor/fleet/internal/protocol"
)

// etcdCoordinator keeps the fleet's registry and the shards' owners in etcd,
// under one prefix:
//
//	<prefix>reg/h/<host>   the host's session lease id; bound to that lease
//	<prefix>reg/n/<node>   ""; bound to the lease of the node's member
//	<prefix>own/<shard>    the owner: {"h": host, "l": lease, "e": epoch, "f": from}; bound to the owner's lease
//	<prefix>epoch/<shard>  the shard's last epoch; never deleted
//
// A shard is taken only by a transaction that finds no owner and the epoch
// it read (compare-and-swap on revisions), and moved only by one that finds
// the mover still the owner at the revision it read: at most one host owns a
// shard at a time, and the epoch grows at every change. The keys go with the
// owner's lease when its member dies or is cut off from etcd for longer than
// the TTL.
type etcdCoordinator struct {
	cli    *clientv3.Client
	prefix string
	ttl    time.Duration
	logger *slog.Logger

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	loops  sync.WaitGroup // the keepalive and watch loops

	mu     sync.Mutex
	host   protocol.HostID
	events coordEvents
	lease  clientv3.LeaseID // 0 while no session
	// nodes are the registered nodes: true once their key is in etcd
	// under the current session.
	nodes map[protocol.NodeID]bool
	// gone are nodes deregistered whose key may be in etcd still: their
	// Deregister's delete failed, or a write of the nodes' keys (a new
	// session, a registration tried again) read them before their
	// Deregister and wrote them after its delete. Each is marked with a
	// generation (gen counts them), so that a delete clears only the mark
	// it saw: a write that puts a key back marks it again, after its put.
	// Every write of nodes' keys, and the keepalive loop, deletes them. (A
	// transaction could not make those writes conditional: etcd holds
	// nothing of a node whose key was deleted, as of one whose key went
	// with an expired session and must be written again; a condition
	// would need a mark kept for every node that ever left.)
	gone map[protocol.NodeID]uint64
	gen  uint64
	// leaving: Leave was called, and the host's key must say so; marked is
	// the session under which it does (0: none yet). A session opened with
	// a read of leaving from before Leave writes the key without the mark:
	// it is written again (settle).
	leaving bool
	marked  clientv3.LeaseID
	// closed: Close or crash was called; Register starts no goroutine
	// (the loops' WaitGroup is waited for).
	closed bool
}

func newEtcdCoordinator(cli *clientv3.Client, prefix string, ttl time.Duration, logger *slog.Logger) *etcdCoordinator {
	ctx, cancel := context.WithCancel(context.Background())
	return &etcdCoordinator{cli: cli, prefix: prefix, ttl: ttl, logger: logger, ctx: ctx, cancel: cancel,
		nodes: map[protocol.NodeID]bool{}, gone: map[protocol.NodeID]uint64{}}
}

// callTimeout bounds each etcd call of the loops.
const callTimeout = 2 * time.Second

func (e *etcdCoordinator) hostKey(h protocol.HostID) string { return e.prefix + "reg/h/" + string(h) }
func (e *etcdCoordinator) nodeKey(n protocol.NodeID) string { return e.prefix + "reg/n/" + string(n) }
func (e *etcdCoordinator) ownKey(s int) string              { return e.prefix + "own/" + strconv.Itoa(s) }
func (e *etcdCoordinator) epochKey(s int) string            { return e.prefix + "epoch/" + strconv.Itoa(s) }

func (e *etcdCoordinator) Open(host protocol.HostID, events coordEvents) {
	e.mu.Lock()
	e.host, e.events = host, events
	e.mu.Unlock()
	e.loops.Go(e.keepalive)
	e.loops.Go(e.watch)
}

// keepalive opens the session (a lease with the host's and the nodes' keys)
// and renews it every sixth of the TTL, reporting each renewal as a
// confirmation that counts from when it was sent.
func (e *etcdCoordinator) keepalive() {
	every := max(e.ttl/6, 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		e.mu.Lock()
		lease := e.lease
		e.mu.Unlock()
		if lease == 0 {
			if err := e.openSession(); err != nil && e.ctx.Err() == nil {
				e.logger.Debug("fleet: cannot open a session in etcd", slog.Any("error", err))
			}
		} else {
			sent := time.Now()
			ctx, cancel := context.WithTimeout(e.ctx, min(every, callTimeout))
			resp, err := e.cli.KeepAliveOnce(ctx, lease)
			cancel()
			switch {
			case err == nil:
				e.events.Confirmed(int64(lease), sent.Add(time.Duration(resp.TTL)*time.Second))
				e.registerPending(lease)
				e.settle(lease)
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				e.logger.Warn("fleet: the member's session in etcd expired; registering again")
				e.mu.Lock()
				e.lease = 0
				for n := range e.nodes {
					e.nodes[n] = false
				}
				e.mu.Unlock()
				e.events.SessionLost()
				continue
			}
		}
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (e *etcdCoordinator) openSession() error {
	ctx, cancel := context.WithTimeout(e.ctx, callTimeout)
	defer cancel()
	sent := time.Now()
	g, err := e.cli.Grant(ctx, int64(e.ttl/time.Second))
	if err != nil {
		return err
	}
	e.mu.Lock()
	host, leaving := e.host, e.leaving
	nodes := make([]protocol.NodeID, 0, len(e.nodes))
	for n := range e.nodes {
		nodes = append(nodes, n)
	}
	e.mu.Unlock()
	ops := []clientv3.Op{clientv3.OpPut(e.hostKey(host), hostValue(g.ID, leaving), clientv3.WithLease(g.ID))}
	for _, n := range nodes {
		ops = append(ops, clientv3.OpPut(e.nodeKey(n), "", clientv3.WithLease(g.ID)))
	}
	if _, err := e.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		_, _ = e.cli.Revoke(context.WithoutCancel(ctx), g.ID)
		return err
	}
	e.mu.Lock()
	e.lease = g.ID
	if leaving {
		e.marked = g.ID
	}
	e.wrote(nodes)
	e.mu.Unlock()
	e.events.Confirmed(int64(g.ID), sent.Add(time.Duration(g.TTL)*time.Second))
	e.settle(g.ID)
	return nil
}

// wrote records that the keys of nodes were written under the current
// session (e.mu held): a node deregistered since its key was read for the
// write is marked gone, its key put back by the write.
func (e *etcdCoordinator) wrote(nodes []protocol.NodeID) {
	for _, n := range nodes {
		if _, ok := e.nodes[n]; ok {
			e.nodes[n] = true
		} else {
			e.markGone(n)
		}
	}
}

// markGone marks node as deregistered with its key maybe in etcd (e.mu
// held).
func (e *etcdCoordinator) markGone(n protocol.NodeID) {
	e.gen++
	e.gone[n] = e.gen
}

// settle mends what the writes of lease's session raced with: it deletes
// the keys of the nodes marked gone, and says in the host's key that it
// leaves if Leave was called and the key does not say so yet. What fails
// is tried again at the next keepalive.
func (e *etcdCoordinator) settle(lease clientv3.LeaseID) {
	e.mu.Lock()
	gone := make(map[protocol.NodeID]uint64, len(e.gone))
	for n, g := range e.gone {
		gone[n] = g
	}
	host, mark := e.host, e.leaving && e.marked != lease && e.lease == lease
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(e.ctx, callTimeout)
	defer cancel()
	for n, g := range gone {
		if _, err := e.cli.Delete(ctx, e.nodeKey(n)); err != nil {
			return
		}
		e.mu.Lock()
		if e.gone[n] == g {
			delete(e.gone, n)
		}
		e.mu.Unlock()
	}
	if mark {
		_ = e.markLeaving(ctx, host, lease)
	}
}

// markLeaving writes the host's key, bound to lease, with the leaving mark.
func (e *etcdCoordinator) markLeaving(ctx context.Context, host protocol.HostID, lease clientv3.LeaseID) error {
	if _, err := e.cli.Put(ctx, e.hostKey(host), hostValue(lease, true), clientv3.WithLease(lease)); err != nil {
		return err
	}
	e.mu.Lock()
	if e.lease == lease {
		e.marked = lease
	}
	e.mu.Unlock()
	return nil
}

// watch reads the registry and follows its changes, from the revision it
// read (so that no change is missed between the read and the watch), and
// reads it again whenever the watch breaks.
func (e *etcdCoordinator) watch() {
	prefix := e.prefix + "reg/"
	for e.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(e.ctx, callTimeout)
		resp, err := e.cli.Get(ctx, prefix, clientv3.WithPrefix())
		cancel()
		if err != nil {
			e.pause(500 * time.Millisecond)
			continue
		}
		var hosts []protocol.HostInfo
		var nodes []protocol.NodeID
		for _, kv := range resp.Kvs {
			if h, n, ok := e.parseReg(kv); ok && h.ID != "" {
				hosts = append(hosts, h)
			} else if ok {
				nodes = append(nodes, n)
			}
		}
		reg := protocol.NewRegistry(resp.Header.Revision, hosts, nodes)
		e.events.Registry(reg)
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(e.ctx))
		for wr := range e.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
			if wr.Err() != nil {
				break
			}
			var addH []protocol.HostInfo
			var rmH []protocol.HostID
			var addN, rmN []protocol.NodeID
			for _, ev := range wr.Events {
				h, n, ok := e.parseReg(ev.Kv)
				if !ok {
					continue
				}
				switch {
				case ev.Type == mvccpb.PUT && h.ID != "":
					addH = append(addH, h)
				case ev.Type == mvccpb.PUT:
					addN = append(addN, n)
				case h.ID != "":
					rmH = append(rmH, h.ID)
				default:
					rmN = append(rmN, n)
				}
			}
			if len(addH)+len(rmH)+len(addN)+len(rmN) > 0 {
				reg = reg.Next(wr.Header.Revision, addH, rmH, addN, rmN)
				e.events.Registry(reg)
			}
		}
		wcancel()
		e.pause(200 * time.Millisecond)
	}
}

// parseReg reads a registry key: a host (with its lease, 0 for a deleted
// key) or a node.
func (e *etcdCoordinator) parseReg(kv *mvccpb.KeyValue) (protocol.HostInfo, protocol.NodeID, bool) {
	k := strings.TrimPrefix(string(kv.Key), e.prefix+"reg/")
	switch {
	case strings.HasPrefix(k, "h/"):
		v, leaving := strings.CutSuffix(string(kv.Value), leavingMark)
		lease, _ := strconv.ParseInt(v, 10, 64)
		return protocol.HostInfo{ID: protocol.HostID(k[2:]), Lease: lease, Leaving: leaving}, "", len(k) > 2
	case strings.HasPrefix(k, "n/"):
		return protocol.HostInfo{}, protocol.NodeID(k[2:]), len(k) > 2
	}
	return protocol.HostInfo{}, "", false
}

// A host key's value is its session's lease id, and leavingMark when it is
// leaving.
const leavingMark = " leaving"

func hostValue(lease clientv3.LeaseID, leaving bool) string {
	v := strconv.FormatInt(int64(lease), 10)
	if leaving {
		v += leavingMark
	}
	return v
}

// Leave marks the host's key. A session being opened meanwhile, which read
// leaving before, writes the key without the mark; it then marks it again
// (settle), as the keepalive loop does when this write fails.
func (e *etcdCoordinator) Leave(ctx context.Context) error {
	e.mu.Lock()
	e.leaving = true
	host, lease := e.host, e.lease
	e.mu.Unlock()
	if lease == 0 {
		return nil // the session, when it opens, says so
	}
	return e.markLeaving(ctx, host, lease)
}

func (e *etcdCoordinator) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-e.ctx.Done():
	case <-t.C:
	}
}

func (e *etcdCoordinator) session() (protocol.HostID, clientv3.LeaseID, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lease == 0 {
		return e.host, 0, errors.New("fleet: no session in etcd")
	}
	return e.host, e.lease, nil
}

// Register marks node as registered and writes its key on a goroutine of
// the loops (the keepalive loop tries again what fails): the caller never
// waits for etcd. A Deregister that comes before the write lands is not
// undone by it: the write finds the node gone and marks it so, and settle
// deletes its key again. A write that failed may have landed all the same,
// and is marked so too.
func (e *etcdCoordinator) Register(node protocol.NodeID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nodes[node] = false
	delete(e.gone, node)
	if e.lease == 0 || e.closed {
		return // the session, when it opens, registers it
	}
	lease := e.lease
	e.loops.Go(func() { e.register(node, lease) })
}

// register writes node's key under lease.
func (e *etcdCoordinator) register(node protocol.NodeID, lease clientv3.LeaseID) {
	registered, err := e.putNode(node, lease)
	switch {
	case err == nil:
		e.settle(lease)
	case registered && e.ctx.Err() == nil:
		e.logger.Warn("fleet: the node could not join the registry yet; it is tried again after each keepalive",
			slog.String("node", string(node)), slog.Any("error", err))
	}
}

// putNode writes node's key under lease, and records the write: done, or,
// for a node deregistered meanwhile, a key to delete again (settle), also
// when the put failed, since it may have landed all the same. It reports
// whether node is still registered.
func (e *etcdCoordinator) putNode(node protocol.NodeID, lease clientv3.LeaseID) (registered bool, err error) {
	ctx, cancel := context.WithTimeout(e.ctx, callTimeout)
	_, err = e.cli.Put(ctx, e.nodeKey(node), "", clientv3.WithLease(lease))
	cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	_, registered = e.nodes[node]
	if err == nil {
		e.wrote([]protocol.NodeID{node})
	} else if !registered {
		e.markGone(node)
	}
	return registered, err
}

// registerPending puts the nodes whose registration failed (the keepalive
// loop settles after it).
func (e *etcdCoordinator) registerPending(lease clientv3.LeaseID) {
	e.mu.Lock()
	var pending []protocol.NodeID
	for n, done := range e.nodes {
		if !done {
			pending = append(pending, n)
		}
	}
	e.mu.Unlock()
	for _, n := range pending {
		if _, err := e.putNode(n, lease); err != nil {
			return
		}
	}
}

// Deregister deletes the node's key; it stays marked gone (and is deleted
// again) until a delete came after every write that may have put it back.
func (e *etcdCoordinator) Deregister(ctx context.Context, node protocol.NodeID) error {
	e.mu.Lock()
	delete(e.nodes, node)
	e.markGone(node)
	g := e.gone[node]
	e.mu.Unlock()
	if _, err := e.cli.Delete(ctx, e.nodeKey(node)); err != nil {
		return err // the keepalive loop tries again
	}
	e.mu.Lock()
	if e.gone[node] == g {
		delete(e.gone, node)
	}
	e.mu.Unlock()
	return nil
}

// owner is an owner key's value.
type owner struct {
	Host  protocol.HostID `json:"h"`
	Lease int64           `json:"l"`
	Epoch uint64          `json:"e"`
	From  protocol.HostID `json:"f,omitempty"`
}

func (o owner) value() string {
	b, _ := json.Marshal(o)
	return string(b)
}

// readOwner reads an owner key, as a range answer holds it: its owner and
// revision, and whether there is one. An owner the fleet cannot read is an
// ErrCorruptKey.
func readOwner(kvs []*mvccpb.KeyValue) (owner, int64, bool, error) {
	if len(kvs) == 0 {
		return owner{}, 0, false, nil
	}
	var o owner
	if err := json.Unmarshal(kvs[0].Value, &o); err != nil || o.Host == "" || o.Epoch == 0 {
		return owner{}, 0, false, corruptKey(kvs[0], err)
	}
	return o, kvs[0].ModRevision, true, nil
}

// readEpoch reads an epoch key: the shard's last epoch and the key's
// revision, 0 and 0 when there is none.
func readEpoch(kvs []*mvccpb.KeyValue) (uint64, int64, error) {
	if len(kvs) == 0 {
		return 0, 0, nil
	}
	epoch, err := strconv.ParseUint(string(kvs[0].Value), 10, 64)
	if err != nil {
		return 0, 0, corruptKey(kvs[0], err)
	}
	return epoch, kvs[0].ModRevision, nil
}

func corruptKey(kv *mvccpb.KeyValue, err error) error {
	if err == nil {
		err = errors.New("no host or epoch")
	}
	return fmt.Errorf("%w: %s = %q (revision %d, lease %x): %w", ErrCorruptKey, kv.Key, kv.Value, kv.ModRevision, kv.Lease, err)
}

func (e *etcdCoordinator) Acquire(ctx context.Context, shard int) (acquired, error) {
	host, lease, err := e.session()
	if err != nil {
		return acquired{}, err
	}
	for {
		er, err := e.cli.Get(ctx, e.epochKey(shard))
		if err != nil {
			return acquired{}, err
		}
		epoch, rev, err := readEpoch(er.Kvs)
		if err != nil {
			return acquired{}, err
		}
		next := owner{Host: host, Lease: int64(lease), Epoch: epoch + 1}
		resp, err := e.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(e.ownKey(shard)), "=", 0),
				clientv3.Compare(clientv3.ModRevision(e.epochKey(shard)), "=", rev)).
			Then(clientv3.OpPut(e.ownKey(shard), next.value(), clientv3.WithLease(lease)),
				clientv3.OpPut(e.epochKey(shard), strconv.FormatUint(next.Epoch, 10))).
			Else(clientv3.OpGet(e.ownKey(shard))).Commit()
		if err != nil {
			return acquired{}, err
		}
		if resp.Succeeded {
			return acquired{ok: true, epoch: next.Epoch, prev: epoch > 0, session: int64(lease)}, nil
		}
		o, _, ok, err := readOwner(resp.Responses[0].GetResponseRange().Kvs)
		switch {
		case err != nil:
			// Nobody knows who owns the shard, nor until when: the one
			// that wrote the key (a member of another version, an
			// operator) may be granting its budget. Overwriting the key
			// could make two owners grant the same budget; the shard stays
			// unowned here until the key is gone (with its lease, or
			// deleted), and the host asks again later.
			return acquired{}, err
		case !ok:
			continue // the epoch moved on under us: read it again
		case o.Host == host && o.Lease == int64(lease):
			// Ours already: an earlier try whose answer was lost, or a
			// transfer to us whose handoff has not come.
			return acquired{ok: true, epoch: o.Epoch, prev: true, from: o.From, session: int64(lease)}, nil
		default:
			return acquired{owner: o.Host, epoch: o.Epoch}, nil
		}
	}
}

func (e *etcdCoordinator) Transfer(ctx context.Context, shards []int, epochs []uint64, to protocol.HostInfo) (transferred, error) {
	host, lease, err := e.session()
	if err != nil {
		return transferred{lost: true}, nil
	}
	for {
		var gets []clientv3.Op
		for _, s := range shards {
			gets = append(gets, clientv3.OpGet(e.ownKey(s)))
		}
		cur, err := e.cli.Txn(ctx).Then(gets...).Commit()
		if err != nil {
			return transferred{}, err
		}
		var cmps []clientv3.Cmp
		var puts []clientv3.Op
		done := true
		for i, s := range shards {
			o, rev, ok, err := readOwner(cur.Responses[i].GetResponseRange().Kvs)
			if err != nil {
				e.logger.Warn("fleet: a shard's owner in etcd cannot be read; the host gives the shard up", slog.Any("error", err))
				return transferred{lost: true}, nil
			}
			if ok && o.Host == to.ID && o.From == host && o.Epoch == epochs[i]+1 {
				continue // an earlier try did it
			}
			done = false
			if !ok || o.Host != host || o.Lease != int64(lease) || o.Epoch != epochs[i] {
				return transferred{lost: true}, nil
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(e.ownKey(s)), "=", rev))
			next := owner{Host: to.ID, Lease: to.Lease, Epoch: epochs[i] + 1, From: host}
			puts = append(puts, clientv3.OpPut(e.ownKey(s), next.value(), clientv3.WithLease(clientv3.LeaseID(to.Lease))),
				clientv3.OpPut(e.epochKey(s), strconv.FormatUint(next.Epoch, 10)))
		}
		if done {
			next := make([]uint64, len(epochs))
			for i := range epochs {
				next[i] = epochs[i] + 1
			}
			return transferred{ok: true, epochs: next}, nil
		}
		if len(cmps) < len(shards) {
			return transferred{}, errors.New("fleet: a transfer found half done") // one transaction does all: a bug
		}
		resp, err := e.cli.Txn(ctx).If(cmps...).Then(puts...).Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return transferred{}, nil // the receiver's session is gone: keep the shards
		}
		if err != nil {
			return transferred{}, err
		}
		if !resp.Succeeded {
			continue // changed under us: read again
		}
	}
}

// crash stops the session's keepalives and the watch without ending the
// session, as a process that dies does: its keys expire with the TTL.
func (e *etcdCoordinator) crash() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.loops.Wait()
	e.mu.Lock()
	e.lease = 0
	e.mu.Unlock()
}

func (e *etcdCoordinator) Close(ctx context.Context, hold time.Duration) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.loops.Wait()
	e.mu.Lock()
	lease := e.lease
	e.lease = 0
	e.mu.Unlock()
	if lease == 0 {
		return nil
	}
	if err := e.tombstone(ctx, lease, hold); err != nil {
		// Revoking now would free the shards while grants may run: the
		// session expires with its TTL instead.
		return err
	}
	_, err := e.cli.Revoke(ctx, lease)
	return err
}

// tombstone binds the owner keys still bound to lease to a new lease that
// lives for hold and is never renewed, all in one transaction that finds
// them unchanged (read again when one changed meanwhile).
func (e *etcdCoordinator) tombstone(ctx context.Context, lease clientv3.LeaseID, hold time.Duration) error {
	var tomb clientv3.LeaseID
	for {
		resp, err := e.cli.Get(ctx, e.prefix+"own/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		var cmps []clientv3.Cmp
		var puts []clientv3.Op
		for _, kv := range resp.Kvs {
			if clientv3.LeaseID(kv.Lease) != lease {
				continue
			}
			if tomb == 0 {
				g, err := e.cli.Grant(ctx, int64((hold+time.Second-1)/time.Second))
				if err != nil {
					return err
				}
				tomb = g.ID
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision))
			puts = append(puts, clientv3.OpPut(string(kv.Key), string(kv.Value), clientv3.WithLease(tomb)))
		}
		if len(puts) == 0 {
			return nil
		}
		t, err := e.cli.Txn(ctx).If(cmps...).Then(puts...).Commit()
		if err != nil {
			return err
		}
		if t.Succeeded {
			return nil
		}
	}
}
