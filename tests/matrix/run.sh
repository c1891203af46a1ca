#!/usr/bin/env bash
# The integration tests against every PostgreSQL major the exporter supports, besides Debian's 15
# that the main ctest pass already uses: the ctest entries below, once per major, with the
# server binaries of scripts/lib/pg_binaries.sh selected through PGLOCK_PG_BINDIR.
# Usage: tests/matrix/run.sh [build-dir]          (default: build, built with tests)
#   PGLOCK_PG_VERSIONS="14 16 17 18 12 13"        majors to run (default), e.g. "17" for one
# Every listed major must pass, 12 and 13 included: "best effort" means some signals
# are absent there (waitstart, sessions_* counters) and their tests skip, not that failures pass.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(realpath "${1:-build}")
source scripts/lib/pg_binaries.sh

versions=${PGLOCK_PG_VERSIONS:-14 16 17 18 12 13}
# fidelity_test (75 s of real-time job patterns) runs on 15 only, in the main ctest pass: times six
# it would cost more CI time than every other matrix test together. standby_test runs on 15 only:
# the npm packages ship initdb, pg_ctl and postgres, not pg_basebackup.
tests='^integration\.(lock_health_test|events_test|hardening_test|app_keys_test|lock_table_test|registry_test|server_log_test|logged_locks_test|timeline_test|vanished_clients_test)$'
failed=()
for major in $versions; do
  start=$(date +%s)
  if ! bindir=$(pg_binaries_bindir "$major"); then
    failed+=("$major")
    continue
  fi
  echo "=== PostgreSQL $major: $bindir"
  if ! (cd "$build" && PGLOCK_PG_BINDIR=$bindir PGLOCK_PG_MAJOR=$major \
          ctest -R "$tests" --output-on-failure -j "$(nproc)" --timeout 900); then
    failed+=("$major")
  fi
  # gtest's own summary of each binary: what passed and what was skipped on this major.
  awk '/^[0-9]+\/[0-9]+ Testing: / { name = $3 }
       /^\[  (PASSED  |SKIPPED )\] / && !/ ms\)$/ { print "  " name ": " $0 }' \
    "$build/Testing/Temporary/LastTest.log"
  echo "=== PostgreSQL $major: $(($(date +%s) - start))s"
done
if ((${#failed[@]} > 0)); then
  echo "matrix: failed on PostgreSQL ${failed[*]}" >&2
  exit 1
fi
echo "matrix: passed on PostgreSQL $versions"
