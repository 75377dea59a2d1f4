GO ?= go

.PHONY: test demo bench bench-full vet fmt fuzz otelcol

## test: vet, then every test with the race detector (needs nothing installed;
## integration tests that need nginx/squid run when .ci/run has installed them)
test: vet
	$(GO) test -race -count=1 -timeout 15m ./...

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## demo: the quickstart example against embedded local servers
demo:
	$(GO) run ./examples/quickstart

## fuzz: a short run of each fuzz target (FUZZTIME each); seed corpora run with every `make test`
FUZZTIME ?= 10s
FUZZ_CONN = FuzzParseKeepAlive FuzzReusable FuzzExchange
fuzz:
	@for f in $(FUZZ_CONN); do \
		echo "fuzz ./conn $$f ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) ./conn || exit 1; \
	done

## bench: Go micro-benchmarks (connactor vs net/http in the same run), then a
## short cmd/connbench run (1s a cell; go, fasthttp and nginx servers in their
## own processes): about 4 minutes on 2 cores
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 500ms ./...
	$(GO) run ./cmd/connbench -server all -duration 1s -warmup 250ms

## bench-full: the same at full length, each cell the median of 3 interleaved
## rounds (BENCHMARKS.md adds -maxother 0.15 on a shared machine): about 20 minutes
bench-full:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	$(GO) run ./cmd/connbench -server all -duration 2s -warmup 300ms -count 3

## otelcol: build (once, cached) the OpenTelemetry Collector the OTLP export test runs
otelcol:
	bash .ci/otelcol.sh
