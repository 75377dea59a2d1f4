// Package fleettest holds the parts that tests and examples of fleet budgets
// share, in the manner of net/http/httptest:
//
//   - Upstream, an HTTP server on 127.0.0.1 that counts the connections it
//     accepts and sees closed, with their times;
//   - Counter, a count of open sockets shared by the clients of several nodes
//     (client.Config.DialContext);
//   - Load, callers that keep a connactor client busy, and RouteOf;
//   - Renewals, a meter provider that reads the renewals a client
//     records;
//   - Etcd, which runs Debian's etcd-server on 127.0.0.1 ports for a test;
//   - RunMember and Process, a cluster member in its own process and the
//     driver's handle on it.
//
// Nothing here is meant for production use.
package fleettest
