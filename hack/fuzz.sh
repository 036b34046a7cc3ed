#!/usr/bin/env bash
# Runs every fuzz target in the repository (func FuzzX in a *_test.go) for FUZZTIME each.
# Targets are discovered, so a new fuzz test needs no change here.
set -euo pipefail
FUZZTIME=${FUZZTIME:-3s}
cd "$(dirname "$0")/.."
status=0
while IFS=: read -r file name; do
	dir=./$(dirname "$file")
	echo "fuzz $dir $name ($FUZZTIME)"
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$dir" 2>&1 | tail -n 3; then
		status=1
	fi
done < <(grep -rHoE '^func (Fuzz[A-Za-z0-9_]+)' --include='*_test.go' . | grep -v '^./hack/kubetools' | sed -E 's#^\./##; s#:func #:#' | sort)
exit $status
