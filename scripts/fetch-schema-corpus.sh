#!/usr/bin/env bash
# fetch-schema-corpus.sh DIR: real-world JSON schemas from npm's registry,
# for TestRealWorldSchemas and TestRealWorldWrongAccepts (internal/structured): GitHub's REST API
# description (@octokit/openapi: its components' schemas), GitHub's webhook
# event schemas (@octokit/webhooks-schemas) and AsyncAPI's specification
# schemas (@asyncapi/specs). Each package is unpacked into DIR/<name>.
set -euo pipefail
dir="${1:?usage: fetch-schema-corpus.sh DIR}"
mkdir -p "$dir"
cd "$dir"
for pkg in @octokit/openapi@23.0.2 @octokit/webhooks-schemas@7.6.1 @asyncapi/specs@6.11.1; do
	name="${pkg#@}"
	name="${name%@*}"
	name="${name//\//-}"
	[[ -d $name ]] && continue
	tgz="$(npm pack --silent "$pkg")"
	mkdir -p "$name.tmp"
	tar xzf "$tgz" -C "$name.tmp"
	rm -f "$tgz"
	mv "$name.tmp/package" "$name"
	rm -rf "$name.tmp"
done
echo "schemas in $dir"
