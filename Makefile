GO ?= go

# cmd/connbench is a Go module of its own (so fasthttp and the comparison clients
# stay out of the library's dependency graph): `go ... ./...` at the root does
# not see it, so every target names it explicitly.
CONNBENCH = cmd/connbench

.PHONY: test test-race test-residue test-connbench test-cluster demo bench bench-full vet fmt fuzz otelcol otel soak soak-endpoints tail overload dropin-baseline fleet-sim fleet-etcd-restart proto proto-check

## test: vet, then every test with the race detector (needs nothing installed;
## integration tests that need nginx/squid/toxiproxy run when .ci/run has
## installed them). Includes the 20-second soak (cmd/soak) and connbench's tests.
## The runs go one after another, and the library's starts first the packages
## that take longest (mostly waiting on daemons, child processes and timeouts):
## on two cores, more test binaries at once than go test's default would load
## the machine enough to make the timing-sensitive cases (timeouts of a few
## milliseconds in the drop-in suites, deadlines in the fault matrix) flaky.
test: vet test-race test-residue test-connbench test-cluster

# The library's slowest packages (about 20-50 s each, mostly waiting).
SLOW_FIRST = ./test/... ./fleet ./examples/... ./cmd/soak ./client

test-race:
	$(GO) test -race -count=1 -timeout 15m $(SLOW_FIRST) ./...

# What 20,000 routes used once leave behind once reclaimed, beside net/http
# (RELIABILITY.md, "Many routes"): each client in a process of its own, the
# two at once, about 15 s, built without the race detector (a wave of 20,000
# routes takes 2-3 s without it, far longer with it).
test-residue:
	$(GO) test -count=1 -timeout 10m -run '^TestReclaimedRoutesLeaveNoMoreThanNetHTTP$$' -v ./client/

test-connbench:
	cd $(CONNBENCH) && $(GO) test -race -count=1 -timeout 10m ./...

# protoactor's cluster races with itself under -race (fleet/RACES.md): the
# in-process cluster tests are built without it (//go:build !race).
test-cluster:
	$(GO) test -count=1 -timeout 5m -run '^TestCluster' ./fleet/

## vet also checks that both modules' go.mod and go.sum are tidy: connbench
## requires the library through a replace, so a new library dependency must be
## tidied into its go.sum too, or a fresh machine cannot build it.
vet:
	$(GO) mod tidy -diff
	cd $(CONNBENCH) && $(GO) mod tidy -diff
	$(GO) vet ./...
	cd $(CONNBENCH) && $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## proto: regenerate the fleet's protobuf code (fleet/internal/protocol/fleetpb)
## from its fleet.proto, with protoc $(PROTOC_VERSION) (Debian bookworm's
## protobuf-compiler) and the protoc-gen-go go.mod pins as a tool (`go tool`
## builds it at the version of google.golang.org/protobuf the module uses).
## Both versions are written into the generated file's header: another protoc
## is refused, so that proto-check compares like with like.
PROTOC_VERSION = 3.21.12
PROTO_DIR = fleet/internal/protocol/fleetpb
proto:
	@v=$$(protoc --version 2>/dev/null); if [ "$$v" != "libprotoc $(PROTOC_VERSION)" ]; then \
		echo "make proto: protoc says '$$v', want libprotoc $(PROTOC_VERSION) (apt-get install protobuf-compiler on Debian bookworm)" >&2; exit 1; fi
	plugin=$$($(GO) tool -n protoc-gen-go) && \
	protoc --plugin=protoc-gen-go="$$plugin" --go_out=. --go_opt=paths=source_relative $(PROTO_DIR)/*.proto

## proto-check: fail if the committed generated code is not what `make proto`
## makes of the committed .proto (changed, or a file missing or left over).
proto-check: proto
	@out=$$(git status --porcelain -- $(PROTO_DIR)); if [ -n "$$out" ]; then \
		echo "make proto-check: the generated code is not current; run make proto and commit:"; echo "$$out"; \
		git diff -- $(PROTO_DIR) | head -40; exit 1; fi

## dropin-baseline: run the drop-in suites (test/dropin) with net/http as well
## as with connactor, and compare net/http's verdicts with the baseline recorded
## in test/dropin/testdata, which `make test` holds connactor to; with
## DROPIN_BASELINE=record, write them there instead (after pinning a new
## release of a suite, or on a new Go release: the test says when).
DROPIN_BASELINE ?= check
dropin-baseline:
	$(GO) test -count=1 -timeout 20m -run '^TestLibrariesOwnSuites' ./test/dropin -dropin.baseline=$(DROPIN_BASELINE)

## demo: the quickstart example against embedded local servers
demo:
	$(GO) run ./examples/quickstart

## fuzz: a short run of each fuzz target; seed corpora run with every `make test`.
## Each target runs a fixed number of executions, sized to about 10 s on this
## project's 2-core machine, not a wall-clock time: Go 1.26's fuzz coordinator can
## race its own -fuzztime deadline on a loaded machine and fail with "context
## deadline exceeded" and no input written (golang/go#75804, fixed in Go 1.27).
## A count budget sets no deadline, so only a real finding fails the run, and it
## writes its reproducer under testdata/fuzz. FUZZTIME=30s (or 1000000x) runs
## every target for that budget instead.
FUZZTIME ?=
FUZZ_CONN = FuzzParseKeepAlive:60000x FuzzReusable:80000x FuzzExchange:100000x FuzzRequestWriter:70000x
FUZZ_H2 = FuzzFrameWatchAgreesWithTheFramer:15000x
fuzz:
	@for t in $(FUZZ_CONN:%=./conn:%) $(FUZZ_H2:%=./conn/h2:%); do \
		pkg=$${t%%:*}; rest=$${t#*:}; f=$${rest%%:*}; n=$${rest#*:}; \
		budget=$(FUZZTIME); budget=$${budget:-$$n}; \
		echo "fuzz $$pkg $$f ($$budget)"; \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $$budget $$pkg || exit 1; \
	done

## bench: Go micro-benchmarks (connactor vs net/http in the same run), then a
## short cmd/connbench run (1s a cell; go, fasthttp and nginx servers in their
## own processes; the HTTP/2 cells on go and nginx), ending with a summary line
## per cell (connactor's ratios and the performance targets met or not): about 6
## minutes on 2 cores
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 500ms ./...
	cd $(CONNBENCH) && $(GO) run . -server all -duration 1s -warmup 250ms

## bench-full: the same at full length, each cell the median of 3 interleaved
## rounds, plus the sweeps (CPU per request against routes and callers), drawn
## into docs/bench/*.svg (BENCHMARKS.md adds -maxother 0.15 on a shared
## machine): about 40 minutes
bench-full:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	cd $(CONNBENCH) && $(GO) run . -server all -groups main,h2 -duration 2s -warmup 300ms -count 3
	cd $(CONNBENCH) && $(GO) run . -server fasthttp -groups sweep -duration 2s -warmup 300ms -count 3 -svg ../../docs/bench

## overload: clients against a local server that serves 4 requests at a time
## (cmd/overload): twice its capacity, a tenfold slowdown, then recovery, with
## callers' deadlines of 1 s; prints goodput, latency, refusals and the
## server's queue per phase and draws docs/bench/overload.svg. About 35 s a
## client. OVERLOADFLAGS adds program flags (e.g. OVERLOADFLAGS='-scale 0.25').
OVERLOADFLAGS ?=
overload:
	$(GO) run ./cmd/overload -svg docs/bench/overload.svg $(OVERLOADFLAGS)

## soak: the long soak (cmd/soak): 1,000,000 requests over 50 routes (20 through
## toxiproxy) with every scripted fault, random cancellations and early body
## closes, checking the pool's invariants throughout; prints a one-screen report
## and fails on any violation. A few minutes on 2 cores. SOAKFLAGS adds program
## flags (e.g. SOAKFLAGS='-requests 100000 -seed 7'), SOAKBUILD build flags
## (SOAKBUILD=-race: much slower). `make test` runs a 20-second version.
SOAKFLAGS ?=
SOAKBUILD ?=
soak:
	$(GO) run $(SOAKBUILD) ./cmd/soak $(SOAKFLAGS)

## tail: what hedged requests and outlier ejection are for (cmd/tail), on
## 127.0.0.1: a server whose one request in 50 stalls 200 ms (latency
## quantiles), one address of three answering 503 (failures, each address's
## share), three addresses over HTTP/2 (each one's share); net/http against
## connactor, 10 s a client in each, tables printed and charts drawn into
## docs/bench/tail-*.svg. About a minute. TAILFLAGS adds program flags
## (e.g. TAILFLAGS='-duration 2s -scenarios tail').
TAILFLAGS ?=
tail:
	$(GO) run ./cmd/tail -svg docs/bench $(TAILFLAGS)

## soak-endpoints: the rolling-restart soak at full length (test/endpoints):
## five addresses behind one host name replaced one at a time under 64
## callers, 10 s each; it fails on any failed request, a connection left to an
## address that left, or a descriptor not given back. `make test` runs it at
## 1 s a step.
soak-endpoints:
	$(GO) test -race -count=1 -v -run '^TestRollingRestart' ./test/endpoints -endpoints.phase=10s

## fleet-sim: the fleet budget protocol's own code on a simulated clock and
## network (fleet/internal/fleetsim): N = 10, 100 and 1,000 members by R = 100,
## 1,000 and 10,000 routes, each through demand shifts, a rolling restart, a
## partition, a host crash and an etcd outage, with delays and loss; rewrites
## the tables in FLEET.md and docs/bench/fleet-sim.svg, and fails if a budget
## was ever exceeded. A few minutes on 2 idle cores (FLEETSIM=-short: N <= 100).
FLEETSIM ?=
fleet-sim:
	$(GO) run ./fleet/internal/fleetsim/cmd/fleetsim -md FLEET.md -svg docs/bench/fleet-sim.svg $(FLEETSIM)

## fleet-etcd-restart: three member processes on a real etcd, which is killed
## (SIGKILL) for 15 s and restarted, 20 runs: the upstream never sees more
## connections than the budget. About a minute and a half a run.
fleet-etcd-restart:
	$(GO) test -count=1 -timeout 60m -run '^TestProcessesHoldTheBudgetWhenEtcdRestarts$$' -v ./fleet/ -args -fleet.etcdrestarts=20

## otelcol: build (once, cached) the OpenTelemetry Collector the OTLP export test runs
otelcol:
	bash .ci/otelcol.sh

## otel: examples/otel exporting to a local OpenTelemetry Collector (built
## once by otelcol; examples/otel/collector.yaml: OTLP/HTTP on 127.0.0.1:4318,
## a line per batch received), stopped when the example ends
otel: SHELL := /bin/bash
otel:
	@bin=$$(bash .ci/otelcol.sh | tail -n 1); \
	$$bin --config examples/otel/collector.yaml & col=$$!; \
	trap 'kill $$col 2>/dev/null; wait $$col 2>/dev/null' EXIT; \
	for i in $$(seq 50); do (echo > /dev/tcp/127.0.0.1/4318) 2>/dev/null && break; sleep 0.1; done; \
	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 $(GO) run ./examples/otel; \
	sleep 1
