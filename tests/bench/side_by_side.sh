#!/usr/bin/env bash
# Poll cost of several exporter binaries side by side on one throwaway PostgreSQL (same run, same
# server, polls interleaved): tests/bench/side_by_side.py does the measuring.
#   tests/bench/side_by_side.sh --binary old=/path/a --binary new=/path/b [--waiters 0,20,200] ...
set -euo pipefail
here=$(cd -- "$(dirname -- "$0")" && pwd)
# shellcheck source=scripts/lib/pg.sh
source "$here/../../scripts/lib/pg.sh"
tmp=$(mktemp -d)
trap 'pg_stop immediate; rm -rf "$tmp"' EXIT
pg_find_bin
mkdir -p "$tmp/logs"
pg_init "$tmp" "$tmp/logs"
pg_start "max_connections = 300" "max_locks_per_transaction = 1024"
PGHOST=$PG_SOCKET PGPORT=$PG_PORT PATH=$PG_BIN:$PATH python3 "$here/side_by_side.py" "$@"
