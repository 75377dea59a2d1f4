GO ?= go

.PHONY: test demo bench vet fmt fuzz otelcol

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

## bench: Go micro-benchmarks (connactor vs net/http in the same run)
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## otelcol: build (once, cached) the OpenTelemetry Collector the OTLP export test runs
otelcol:
	bash .ci/otelcol.sh
