package fleet_test

// The etcd coordinator's tests: on a real etcd (Debian's etcd-server,
// started by the test on 127.0.0.1), with calls of a concurrent member, or
// faults, put at exact points of the coordinator's work by its client's KV.

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/connactor/connactor/fleet"
	"github.com/connactor/connactor/fleet/etcdprovider"
	"github.com/connactor/connactor/fleet/internal/protocol"
	"github.com/connactor/connactor/internal/testkit/fleettest"
)

// startEtcdServer starts etcd for the test, or skips (fails under CI=true)
// when there is none.
func startEtcdServer(t testing.TB) *fleettest.Etcd {
	t.Helper()
	bin := needEtcd(t)
	e, err := fleettest.StartEtcd(bin, t.TempDir(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop() })
	return e
}

// newEtcdClient returns a client of e, closed with the test.
func newEtcdClient(t testing.TB, e *fleettest.Etcd) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(etcdprovider.ClientConfig([]string{e.Endpoint()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// startEtcd starts etcd for the test, or skips (fails under CI=true) when
// there is none, and returns a client.
func startEtcd(t testing.TB) *clientv3.Client {
	t.Helper()
	return newEtcdClient(t, startEtcdServer(t))
}

// hookKV is an etcd client's KV that runs a hook before each put and each
// transaction's commit, passing the rest on.
type hookKV struct {
	clientv3.KV
	mu   sync.Mutex
	hook func(op, key string) error // op "put" (with its key) or "txn"; an error fails the call
}

func (k *hookKV) set(hook func(op, key string) error) {
	k.mu.Lock()
	k.hook = hook
	k.mu.Unlock()
}

func (k *hookKV) run(op, key string) error {
	k.mu.Lock()
	hook := k.hook
	k.mu.Unlock()
	if hook == nil {
		return nil
	}
	return hook(op, key)
}

func (k *hookKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	if err := k.run("put", key); err != nil {
		return nil, err
	}
	return k.KV.Put(ctx, key, val, opts...)
}

func (k *hookKV) Txn(ctx context.Context) clientv3.Txn { return &hookTxn{Txn: k.KV.Txn(ctx), k: k} }

type hookTxn struct {
	clientv3.Txn
	k *hookKV
}

func (t *hookTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *hookTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *hookTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *hookTxn) Commit() (*clientv3.TxnResponse, error) {
	if err := t.k.run("txn", ""); err != nil {
		return nil, err
	}
	return t.Txn.Commit()
}

// etcdUnit is one member's etcd coordinator, its client's KV hooked, and a
// plain client to read etcd with.
type etcdUnit struct {
	t     *testing.T
	e     *fleet.EtcdCoordinator
	kv    *hookKV
	plain *clientv3.Client
	ctx   context.Context
}

const unitHost = protocol.HostID("127.0.0.1:7001")

func newEtcdUnit(t *testing.T) *etcdUnit {
	srv := startEtcdServer(t)
	cli := newEtcdClient(t, srv)
	kv := &hookKV{KV: cli.KV}
	cli.KV = kv
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	u := &etcdUnit{t: t, e: fleet.NewEtcdCoordinator(cli, "/fleet-unit/", unitHost), kv: kv,
		plain: newEtcdClient(t, srv), ctx: ctx}
	t.Cleanup(func() { _ = u.e.Close(context.Background(), time.Second) })
	return u
}

// value returns key's value, and whether it is in etcd.
func (u *etcdUnit) value(key string) (string, bool) {
	u.t.Helper()
	resp, err := u.plain.Get(u.ctx, key)
	if err != nil {
		u.t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "", false
	}
	return string(resp.Kvs[0].Value), true
}

// A node deregistered while the member's session opens (after the session
// read the nodes to register, before its transaction wrote them) is not
// left registered by that transaction.
func TestAnOpeningSessionLeavesNoKeyOfANodeDeregisteredMeanwhile(t *testing.T) {
	u := newEtcdUnit(t)
	const stays, leaves = protocol.NodeID("127.0.0.1:7001/keeper$1"), protocol.NodeID("127.0.0.1:7001/keeper$2")
	for _, n := range []protocol.NodeID{stays, leaves} {
		u.e.Register(n) // no session yet: registered when it opens
	}
	u.kv.set(func(op, _ string) error {
		if op == "txn" {
			u.kv.set(nil)
			return u.e.Deregister(u.ctx, leaves)
		}
		return nil
	})
	if err := u.e.OpenSession(); err != nil {
		t.Fatal(err)
	}
	if _, ok := u.value(u.e.NodeKey(leaves)); ok {
		t.Errorf("the node deregistered while the session opened is registered")
	}
	if _, ok := u.value(u.e.NodeKey(stays)); !ok {
		t.Errorf("the node that stays is not registered")
	}
}

// A node whose registration failed, and which is deregistered while the
// keepalive loop tries it again, is not left registered by that try.
func TestARetriedRegistrationLeavesNoKeyOfANodeDeregisteredMeanwhile(t *testing.T) {
	u := newEtcdUnit(t)
	if err := u.e.OpenSession(); err != nil {
		t.Fatal(err)
	}
	const n = protocol.NodeID("127.0.0.1:7001/keeper$3")
	tried := make(chan struct{})
	u.kv.set(func(op, _ string) error {
		if op == "put" { // Register's write, refused; tried again below
			u.kv.set(nil)
			close(tried)
			return errors.New("refused")
		}
		return nil
	})
	u.e.Register(n)
	<-tried
	u.kv.set(func(op, key string) error {
		if op == "put" && key == u.e.NodeKey(n) {
			u.kv.set(nil)
			return u.e.Deregister(u.ctx, n)
		}
		return nil
	})
	u.e.RegisterPending()
	if _, ok := u.value(u.e.NodeKey(n)); ok {
		t.Errorf("the node deregistered while its registration was tried again is registered")
	}
}

// Register does not wait for etcd: it returns while the node's write is
// held (an etcd that does not answer). A Deregister that comes before the
// write lands is not undone by it: the key the late write puts back is
// deleted again.
func TestRegisterNeitherWaitsForEtcdNorUndoesADeregister(t *testing.T) {
	u := newEtcdUnit(t)
	if err := u.e.OpenSession(); err != nil {
		t.Fatal(err)
	}
	const n = protocol.NodeID("127.0.0.1:7001/keeper$4")
	held, release := make(chan struct{}), make(chan struct{})
	u.kv.set(func(op, key string) error {
		if op == "put" && key == u.e.NodeKey(n) {
			u.kv.set(nil)
			close(held)
			<-release
		}
		return nil
	})
	now, err := u.plain.Get(u.ctx, u.e.NodeKey(n))
	if err != nil {
		t.Fatal(err)
	}
	events := u.plain.Watch(u.ctx, u.e.NodeKey(n), clientv3.WithRev(now.Header.Revision+1))

	registered := make(chan struct{})
	go func() { // the test waits for registered
		u.e.Register(n)
		close(registered)
	}()
	select {
	case <-registered:
	case <-time.After(20 * time.Second): // a guard against a hung test
		close(release)
		t.Fatal("Register waited for etcd to answer its write")
	}
	<-held
	if err := u.e.Deregister(u.ctx, n); err != nil {
		t.Fatal(err)
	}
	close(release)
	var seen []string
	for len(seen) < 2 {
		resp, ok := <-events
		if !ok {
			t.Fatalf("the watch ended after %v", seen)
		}
		for _, ev := range resp.Events {
			seen = append(seen, ev.Type.String())
		}
	}
	if seen[0] != "PUT" || seen[1] != "DELETE" {
		t.Fatalf("the node's key saw %v, want the late write's PUT, then its DELETE", seen)
	}
	if _, ok := u.value(u.e.NodeKey(n)); ok {
		t.Errorf("the node deregistered before its registration landed is registered")
	}
}

// Leave, called while the session opens (after the session read that the
// host was not leaving, before its transaction wrote the host's key), is
// not lost: the host's key says that it leaves.
func TestLeaveDuringASessionsOpeningIsNotLost(t *testing.T) {
	u := newEtcdUnit(t)
	u.kv.set(func(op, _ string) error {
		if op == "txn" {
			u.kv.set(nil)
			return u.e.Leave(u.ctx)
		}
		return nil
	})
	if err := u.e.OpenSession(); err != nil {
		t.Fatal(err)
	}
	if v, ok := u.value(u.e.HostKey(unitHost)); !ok || !strings.HasSuffix(v, fleet.LeavingMark) {
		t.Errorf("the host's key is %q (present %v) after Leave, want it marked as leaving", v, ok)
	}
}

// An owner or epoch key the fleet cannot read (another program wrote it) is
// a clear error for Acquire, after one transaction, not a loop; and the
// shard is not taken over it.
func TestAcquireFailsClearlyOnAnUnreadableKey(t *testing.T) {
	u := newEtcdUnit(t)
	if err := u.e.OpenSession(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		shard int
		key   func(int) string
		value string
	}{
		{"an owner that is not JSON", 7, u.e.OwnKey, "not json"},
		{"an owner with no host", 8, u.e.OwnKey, `{"e":3}`},
		{"an epoch that is not a number", 9, u.e.EpochKey, "x"},
	} {
		if _, err := u.plain.Put(u.ctx, tc.key(tc.shard), tc.value); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(u.ctx)
		txns := 0
		u.kv.set(func(op, _ string) error {
			if op == "txn" {
				if txns++; txns > 3 {
					cancel() // looping
				}
			}
			return nil
		})
		owned, err := u.e.AcquireShard(ctx, tc.shard)
		cancel()
		u.kv.set(nil)
		if !errors.Is(err, fleet.ErrCorruptKey) || owned {
			t.Errorf("%s: Acquire: owned %v, %v after %d transactions; want ErrCorruptKey", tc.name, owned, err, txns)
		}
		if v, _ := u.value(tc.key(tc.shard)); v != tc.value {
			t.Errorf("%s: the key was overwritten with %q", tc.name, v)
		}
	}
	// With the key gone, the shard is taken.
	if _, err := u.plain.Delete(u.ctx, u.e.OwnKey(7)); err != nil {
		t.Fatal(err)
	}
	if owned, err := u.e.AcquireShard(u.ctx, 7); err != nil || !owned {
		t.Fatalf("Acquire after the key was deleted: owned %v, %v", owned, err)
	}
}
