#!/usr/bin/env bash
# Writes tests/costs/ from this machine's test times (the last runs of scripts/test.sh), keeping
# only the ctest entries the release build has now, longest first: a fresh machine's ctest and
# matrix start the longest tests first with them (tests/costs/README.md).
# Usage: scripts/refresh_test_costs.sh [BUILD_DIR]   (default: build, configured with the tests)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
if [[ -z ${PGLOCK_TEST_COST_DIR:-} ]]; then
  if ((EUID == 0)); then PGLOCK_TEST_COST_DIR=/var/cache/pglock_exporter/test-costs
  else PGLOCK_TEST_COST_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/pglock_exporter/test-costs; fi
fi
entries=$(mktemp)
trap 'rm -f "$entries"' EXIT
(cd "$build" && ctest -N) | sed -n 's/^ *Test *#[0-9]*: //p' >"$entries"
[[ -s $entries ]] || { echo "no ctest entries in $build (configure it with -DPGLOCK_BUILD_TESTS=ON)" >&2; exit 1; }
for b in build build-asan; do
  from=$PGLOCK_TEST_COST_DIR/$b-CTestCostData.txt
  [[ -f $from ]] || { echo "no times in $from: run scripts/test.sh first" >&2; exit 1; }
  # ctest's format: NAME RUNS SECONDS, then a line of three dashes and the names that failed.
  { awk 'NR == FNR { want[$1] = 1; next } /^---/ { exit } ($1 in want) { print $1, 1, $3 }' \
      "$entries" "$from" | sort -k3 -rn
    echo '---'; } >"tests/costs/$b-CTestCostData.txt"
done
cp "$PGLOCK_TEST_COST_DIR/build-matrix_costs.txt" tests/costs/build-matrix_costs.txt
wc -l tests/costs/*.txt
