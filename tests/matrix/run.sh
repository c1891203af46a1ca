#!/usr/bin/env bash
# The integration tests against every PostgreSQL major the exporter supports, besides Debian's 15
# that the main ctest pass already uses: the binaries below, once per major, with the server
# binaries of scripts/lib/pg_binaries.sh selected through PGLOCK_PG_BINDIR, side by side
# (tests/matrix/run.py: every run has its own server, port and directory).
# Usage: tests/matrix/run.sh [build-dir]          (default: build, built with tests)
#   PGLOCK_PG_VERSIONS="14 16 17 18 12 13"        majors to run (default), e.g. "17" for one
#   PGLOCK_MATRIX_JOBS=4                          runs at once (default 2 per core)
# Every listed major must pass, 12 and 13 included: "best effort" means some signals
# are absent there (waitstart, sessions_* counters) and their tests skip, not that failures pass.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(realpath "${1:-build}")

versions=${PGLOCK_PG_VERSIONS:-14 16 17 18 12 13}
# fidelity_test (75 s of real-time job patterns) runs on 15 only, in the main ctest pass: times six
# it would cost more CI time than every other matrix test together. standby_test runs on 15 only:
# the npm packages ship initdb, pg_ctl and postgres, not pg_basebackup.
tests="lock_health_test events_test hardening_test app_keys_test lock_table_test registry_test
       server_log_test logged_locks_test timeline_test vanished_clients_test preflight_test"
exec python3 tests/matrix/run.py --build "$build" --majors "$versions" --tests "$tests" \
  --shards logged_locks_test=2 \
  --jobs "${PGLOCK_MATRIX_JOBS:-$((2 * $(nproc)))}"
