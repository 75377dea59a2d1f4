package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/connactor/connactor/client"
)

// etcdRoot is where the members of examples/fleet's cluster register in etcd
// (fleettest.RunMember): a member must use the same root to join them.
const etcdRoot = "/connactor-fleet"

// joinCluster starts sys as a member of the cluster that spec names
// ("host:port/name": an etcd client endpoint on 127.0.0.1 and the cluster's
// name), with disthash as the identity lookup and the budget grain's kind
// (client.FleetKind) among its kinds, as every member of a fleet has.
// StartMember takes about a second.
func joinCluster(sys *actor.ActorSystem, spec string) (*cluster.Cluster, error) {
	endpoint, name, ok := strings.Cut(spec, "/")
	if !ok || endpoint == "" || name == "" {
		return nil, fmt.Errorf("-join %q: want the etcd endpoint and the cluster's name, host:port/name", spec)
	}
	cfg := cluster.Configure(name, &etcdProvider{endpoints: []string{endpoint}}, disthash.New(),
		remote.Configure("127.0.0.1", 0), cluster.WithKinds(client.FleetKind()))
	c := cluster.New(sys, cfg)
	c.StartMember()
	return c, nil
}

// etcdProvider builds protoactor's etcd provider inside StartMember: an etcd
// client made before the member starts races with the gRPC logger that
// remote.Start installs (see the repository's PROTOACTOR.md).
type etcdProvider struct {
	endpoints []string
	p         *etcd.Provider
}

func (e *etcdProvider) build() error {
	p, err := etcd.NewWithConfig(etcdRoot, clientv3.Config{
		Endpoints: e.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
	})
	e.p = p
	return err
}

func (e *etcdProvider) StartMember(c *cluster.Cluster) error {
	if err := e.build(); err != nil {
		return err
	}
	return e.p.StartMember(c)
}

func (e *etcdProvider) StartClient(c *cluster.Cluster) error {
	if err := e.build(); err != nil {
		return err
	}
	return e.p.StartClient(c)
}

func (e *etcdProvider) Shutdown(graceful bool) error {
	if e.p == nil {
		return nil
	}
	return e.p.Shutdown(graceful)
}
