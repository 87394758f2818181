#!/usr/bin/env bash
# fuzz.sh DURATION: runs every Go fuzz target of the repository for DURATION
# each (go test runs one fuzz target at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-5s}"
status=0
while IFS= read -r file; do
	pkg="./$(dirname "$file")"
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
		echo "fuzz $pkg $target for $duration"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$duration" "$pkg" || status=1
	done
done < <(grep -rlE '^func Fuzz' --include='*_test.go' . | sort)
exit $status
