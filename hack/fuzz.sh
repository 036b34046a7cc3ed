#!/usr/bin/env bash
# Runs every fuzz target in the repository (func FuzzX in a *_test.go) for FUZZTIME each.
# Targets are discovered, so a new fuzz test needs no change here.
#
# FUZZ, an extended regular expression, keeps the targets whose "package:FuzzX" it matches
# (every target by default), and FUZZFLAGS is added to each go test; a long run of one
# target, as docs/fuzzing.md records them:
#   make fuzz FUZZ=identity:FuzzCheckCSR FUZZTIME=1000000x FUZZFLAGS='-parallel 2 -fuzzminimizetime 0'
#
# Go's fuzzing coordinator can fail a run that found nothing: when -fuzztime expires it may
# read the deadline of its parent context before its child's is set, and report a bare
# "context deadline exceeded" with no failing input written (a known race in internal/fuzz).
# A failure with that signature, and no "Failing input written to", is run once more; any
# other failure, or the same one twice, fails. A failing run's whole output is shown.
set -euo pipefail
FUZZTIME=${FUZZTIME:-3s}
FUZZ=${FUZZ:-}
read -r -a flags <<<"${FUZZFLAGS:-}"
cd "$(dirname "$0")/.."
status=0

run() { # dir name -> output in $out, exit status returned
	local rc=0
	out=$(go test -run '^$' -fuzz "^${2}\$" -fuzztime "$FUZZTIME" "${flags[@]}" "$1" 2>&1) || rc=$?
	return $rc
}

found=0
while IFS=: read -r file name; do
	dir=./$(dirname "$file")
	if [[ -n $FUZZ ]] && ! grep -qE -- "$FUZZ" <<<"${dir#./}:$name"; then
		continue
	fi
	found=$((found + 1))
	echo "fuzz $dir $name ($FUZZTIME)"
	if run "$dir" "$name"; then
		tail -n 3 <<<"$out"
		continue
	fi
	if grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written to' <<<"$out"; then
		echo "fuzz $dir $name: the coordinator's deadline race (nothing found); running it again"
		if run "$dir" "$name"; then
			tail -n 3 <<<"$out"
			continue
		fi
	fi
	echo "$out"
	status=1
done < <(grep -rHoE '^func (Fuzz[A-Za-z0-9_]+)' --include='*_test.go' . | grep -v '^./hack/kubetools' | sed -E 's#^\./##; s#:func #:#' | sort)
if [[ $found == 0 ]]; then
	echo "fuzz: no target matches FUZZ=$FUZZ" >&2
	exit 1
fi
exit $status
