// Package testkit holds connactor's test harness, apart from the runtime's own
// internals (internal/mailbox, internal/wait, internal/errs): the scripted
// fault servers (faultserver), a server on several loopback addresses and the
// resolver that puts them behind one name (loopbacks), proxies (proxytest),
// the real daemons the integration tests start on 127.0.0.1 (realtest: nginx,
// squid, etcd), toxiproxy's client (toxi), the requests several packages'
// tests send (calls), the parts that fleet budget tests and examples share
// (fleettest: counted upstreams, etcd, member processes), and the helpers
// that find programs (lookpath), name errors in reports (errname) and record
// what is logged (logrec), and what the benchmark programs share (benchkit:
// quantiles, chart numbers, the server and client of a run). Nothing
// in the library imports it; the tests, cmd/soak and cmd/connbench do.
package testkit
