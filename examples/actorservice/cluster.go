package main

import (
	"fmt"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/connactor/connactor/fleet"
	"github.com/connactor/connactor/fleet/etcdprovider"
	"github.com/connactor/connactor/internal/testkit/fleettest"
)

// joinCluster starts sys as a member of the cluster that spec names
// ("host:port/name": an etcd client endpoint on 127.0.0.1 and the cluster's
// name), with disthash as the identity lookup and the budget grain's kind
// (fleet.Kind) among its kinds, as every member of a fleet has.
// StartMember takes about a second.
func joinCluster(sys *actor.ActorSystem, spec string) (*cluster.Cluster, error) {
	endpoint, name, ok := strings.Cut(spec, "/")
	if !ok || endpoint == "" || name == "" {
		return nil, fmt.Errorf("-join %q: want the etcd endpoint and the cluster's name, host:port/name", spec)
	}
	cfg := cluster.Configure(name, etcdprovider.New(fleettest.EtcdRoot, []string{endpoint}), disthash.New(),
		remote.Configure("127.0.0.1", 0), cluster.WithKinds(fleet.Kind()))
	c := cluster.New(sys, cfg)
	c.StartMember()
	return c, nil
}
