#!/usr/bin/env bash
# fuzz.sh BUDGET: runs every Go fuzz target of the repository for BUDGET
# each (go test runs one fuzz target at a time). The budget is a count of
# executions ("50000x"): a duration ("5s") makes go1.26's fuzz coordinator
# race its own deadline and, on a loaded machine, fail a target with a bare
# "context deadline exceeded" and no failing input (golang/go#75804, fixed
# in go1.27). A count has no deadline to race; a real finding still fails
# the run and writes its input under testdata/fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
budget="${1:-50000x}"
status=0
while IFS= read -r file; do
	pkg="./$(dirname "$file")"
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
		echo "fuzz $pkg $target for $budget"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$budget" "$pkg" || status=1
	done
done < <(grep -rlE '^func Fuzz' --include='*_test.go' . | sort)
exit $status
