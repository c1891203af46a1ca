#!/usr/bin/env bash
# What reading the server's log costs the exporter: two exporters side by side on one throwaway
# PostgreSQL, one reading a jsonlog that a writer appends at a steady rate, one without a log;
# then the reader's resident size after a burst of 1 GB with one 64 MB record. The measuring is
# tests/bench/server_log_cost.py; not part of the test run.
#   tests/bench/server_log_cost.sh [--rate 1000] [--seconds 60] [--burst-mb 1024] [--big-mb 64]
set -euo pipefail
here=$(cd -- "$(dirname -- "$0")" && pwd)
# shellcheck source=scripts/lib/pg.sh
source "$here/../../scripts/lib/pg.sh"
binary=${PGLOCK_EXPORTER_BINARY:-$here/../../build/pglock_exporter}
tmp=$(mktemp -d)
trap 'pg_stop immediate; rm -rf "$tmp"' EXIT
pg_find_bin
mkdir -p "$tmp/logs"
pg_init "$tmp" "$tmp/logs"
pg_start
PGHOST=$PG_SOCKET PGPORT=$PG_PORT python3 "$here/server_log_cost.py" --binary "$binary" \
  --dir "$tmp" "$@"
