#!/usr/bin/env bash
# Resident size of several exporters side by side while held locks go 15k -> 20k -> 80k -> 20k,
# on one throwaway PostgreSQL: tests/bench/memory_drop.py does the measuring.
#   tests/bench/memory_drop.sh --variant glibc=build/pglock_exporter \
#     --variant jemalloc=build/pglock_exporter --env jemalloc:LD_PRELOAD=libjemalloc.so.2
set -euo pipefail
here=$(cd -- "$(dirname -- "$0")" && pwd)
# shellcheck source=scripts/lib/pg.sh
source "$here/../../scripts/lib/pg.sh"
tmp=$(mktemp -d)
trap 'pg_stop immediate; rm -rf "$tmp"' EXIT
pg_find_bin
mkdir -p "$tmp/logs"
pg_init "$tmp" "$tmp/logs"
pg_start "max_connections = 100" "max_locks_per_transaction = 1024"
PGHOST=$PG_SOCKET PGPORT=$PG_PORT PATH=$PG_BIN:$PATH python3 "$here/memory_drop.py" "$@"
