// Package etcdprovider is protoactor's etcd cluster provider, built when the
// member starts rather than before: an etcd client made before
// cluster.StartMember races with the gRPC logger that remote.Start installs
// (see the repository's notes on the pinned protoactor-go). Members of one
// fleet must use the same root.
package etcdprovider

import (
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// ClientConfig is the etcd client configuration this package's provider
// uses, and the one to give the fleet's own client (fleet.Options.Etcd): no
// logging, and a reconnect back-off of at most a second. gRPC's default
// back-off grows towards two minutes while etcd is down, so a client can
// find etcd again many seconds after it is back: meanwhile its member cannot
// renew its session, which may expire, and the member's shares stay at
// nothing until it has registered again.
func ClientConfig(endpoints []string) clientv3.Config {
	return clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second,
		})}}
}

// New returns a cluster provider that registers members under root in the
// etcd servers at endpoints.
func New(root string, endpoints []string) cluster.ClusterProvider {
	return &provider{root: root, endpoints: endpoints}
}

type provider struct {
	root      string
	endpoints []string
	p         *etcd.Provider
}

func (e *provider) build() error {
	p, err := etcd.NewWithConfig(e.root, ClientConfig(e.endpoints))
	e.p = p
	return err
}

// StartMember builds the etcd provider and starts c as a member.
func (e *provider) StartMember(c *cluster.Cluster) error {
	if err := e.build(); err != nil {
		return err
	}
	return e.p.StartMember(c)
}

// StartClient builds the etcd provider and starts c as a client.
func (e *provider) StartClient(c *cluster.Cluster) error {
	if err := e.build(); err != nil {
		return err
	}
	return e.p.StartClient(c)
}

// Shutdown stops the provider, if it was built.
func (e *provider) Shutdown(graceful bool) error {
	if e.p == nil {
		return nil
	}
	return e.p.Shutdown(graceful)
}
