#!/usr/bin/env bash
# Builds genq's test OpenTelemetry Collector (test/otelcol: the OTLP
# receiver and the file exporter) from the Go module proxy, as nats-server
# is, and prints the binary's path. It is cached under
# ${GENQ_CACHE:-~/.cache/genq}/otelcol/<hash of its module and Go>, so a
# second run exits at once; a build takes about 75 s on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../test/otelcol"

key=$( (cat go.mod go.sum ./*.go; go version) | sha256sum | cut -c1-16)
dir="${GENQ_CACHE:-$HOME/.cache/genq}/otelcol/$key"
bin="$dir/otelcol-genq"
if [[ ! -x "$bin" ]]; then
	mkdir -p "$dir"
	# Built beside its final name and moved, so that a build cut off
	# halfway never leaves a binary that looks whole.
	CGO_ENABLED=0 go build -trimpath -o "$bin.tmp.$$" . >&2
	mv -f "$bin.tmp.$$" "$bin"
fi
echo "$bin"
