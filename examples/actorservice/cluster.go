package main

import (
	"fmt"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/connactor/connactor/fleet"
	"github.com/connactor/connactor/fleet/etcdprovider"
	"github.com/connactor/connactor/internal/testkit/fleettest"
)

// joinCluster starts sys as a member of the cluster that spec names
// ("host:port/name": an etcd client endpoint on 127.0.0.1 and the cluster's
// name), with disthash as the identity lookup and the budget host's kind
// (fleet.Kind) among its kinds, as every member of a fleet has, and returns
// the cluster and an etcd client for the fleet budget (made after
// StartMember: an earlier one races with remote.Start's gRPC logger).
// StartMember takes about a second.
func joinCluster(sys *actor.ActorSystem, spec string) (*cluster.Cluster, *clientv3.Client, error) {
	endpoint, name, ok := strings.Cut(spec, "/")
	if !ok || endpoint == "" || name == "" {
		return nil, nil, fmt.Errorf("-join %q: want the etcd endpoint and the cluster's name, host:port/name", spec)
	}
	cfg := cluster.Configure(name, etcdprovider.New(fleettest.EtcdRoot, []string{endpoint}), disthash.New(),
		remote.Configure("127.0.0.1", 0), cluster.WithKinds(fleet.Kind()))
	c := cluster.New(sys, cfg)
	c.StartMember()
	cli, err := clientv3.New(etcdprovider.ClientConfig([]string{endpoint}))
	if err != nil {
		c.Shutdown(true)
		return nil, nil, err
	}
	return c, cli, nil
}
