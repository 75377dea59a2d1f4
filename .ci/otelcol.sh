#!/usr/bin/env bash
# Builds the small OpenTelemetry Collector the telemetry integration test runs
# (client/collector_test.go): OTLP receiver, batch processor, debug and file
# exporters. The build is cached: the binary lands in
#   ${XDG_CACHE_HOME:-$HOME/.cache}/connactor/otelcol-<hash of this script>
# and is rebuilt only when missing. Prints the binary's path on stdout (last line).
# Takes several minutes on 2 cores the first time; seconds afterwards.
set -euo pipefail

BUILDER_VERSION=v0.161.0
COMPONENTS_VERSION=v0.161.0
PROVIDERS_VERSION=v1.67.0

here="$(cd "$(dirname "$0")" && pwd)"
hash="$(sha256sum "$here/otelcol.sh" | cut -c1-12)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/connactor"
bin="$cache/otelcol-$hash"
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

export PATH="$PATH:/usr/local/go/bin"
gobin="$(go env GOPATH)/bin"
if ! "$gobin/builder" version 2>/dev/null | grep -q "$BUILDER_VERSION"; then
	echo "otelcol.sh: installing the collector builder $BUILDER_VERSION" >&2
	GOFLAGS= go install "go.opentelemetry.io/collector/cmd/builder@$BUILDER_VERSION" >&2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat >"$work/manifest.yaml" <<YAML
dist:
  name: otelcol-connactor
  description: Collector for connactor's telemetry integration test
  output_path: $work/out
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider $PROVIDERS_VERSION
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider $PROVIDERS_VERSION
  - gomod: go.opentelemetry.io/collector/confmap/provider/yamlprovider $PROVIDERS_VERSION
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver $COMPONENTS_VERSION
processors:
  - gomod: go.opentelemetry.io/collector/processor/batchprocessor $COMPONENTS_VERSION
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter $COMPONENTS_VERSION
  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter $COMPONENTS_VERSION
YAML
start=$(date +%s)
echo "otelcol.sh: building the collector (first time: several minutes)" >&2
GOFLAGS= "$gobin/builder" --config "$work/manifest.yaml" --ldflags "-s -w" >&2
mkdir -p "$cache"
mv "$work/out/otelcol-connactor" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "otelcol.sh: built $bin in $(( $(date +%s) - start ))s" >&2
echo "$bin"
