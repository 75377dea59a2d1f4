// Package dropin proves that connactor is a drop-in transport for real users'
// libraries: its test (and nothing else) takes the pinned, released sources of
// hashicorp/go-retryablehttp, go-resty/resty and gojek/heimdall from the Go
// module cache, adds a small generated file that makes each library build its
// clients on a connactor *client.Client, and runs the libraries' own test
// suites with connactor. No third-party source is kept in this repository.
//
// The baseline is the same suites run with net/http's Transport. For a pinned
// release it does not change from run to run, so its verdicts are recorded in
// testdata (baseline-<suite>.json, with the release, the Go release and a hash
// of the patches they belong to) and run again only when one of those
// changes (the test then fails and says how to record them anew) or when
// asked: -dropin.baseline=check compares a net/http run with the record,
// -dropin.baseline=record writes it (`make dropin-baseline`).
//
// The assertion: connactor passes every test that net/http passes, except the
// tests listed as needing a *http.Transport by type (excluded, with the reason)
// and the known failures (each with its root cause in connactor), a list that
// shrinks as connactor is fixed. A listed test that passes fails the run too,
// so the list stays honest.
package dropin
