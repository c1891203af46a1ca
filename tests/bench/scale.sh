#!/usr/bin/env bash
# Scale benchmark of pglock_exporter: what idle databases and many targets on one
# server cost. Not part of the default test run. On one throwaway PostgreSQL (scripts/lib/pg.sh):
#
#   1db        one target, the server's own databases only
#   1000db     one target, 1,000 databases never connected to, 5 of them with one idle session
#   200db-1t   one target, 200 databases (each with a 1-row lease table, not configured)
#   200db-200t 200 targets, one per database, each with its database's lease table (today's way)
#   200db-1t-leases  one target with the 200 lease tables as [[targets.leases]] database = "..."
#
# and per scenario (tests/bench/scale.py): series and bytes of one /metrics scrape (plain, gzip),
# RSS and threads, CPU per poll round of the exporter and of its backends, poll durations, lease
# tables up, p50/p99 of sequential scrapes. Writes tests/bench/results/scale-latest.md (+ .tsv).
#
# With BENCH_OLD_BINARY set, every scenario the old binary can run is measured for it too, just
# before the new one ("(old)" / "(new)" after the scenario name): side by side in one run.
#
# Environment: PGLOCK_EXPORTER_BINARY (required), BENCH_OLD_BINARY, BENCH_OUT, BENCH_INTERVAL (poll interval in
# seconds, default 5), BENCH_WINDOW (CPU window in seconds, default 30), BENCH_SCRAPES (default
# 100), BENCH_KEEP=1 keeps the temporary directory.
set -euo pipefail
export LC_ALL=C

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd -- "$here/../.." && pwd)
# shellcheck source=scripts/lib/pg.sh
source "$repo/scripts/lib/pg.sh"
bin=${PGLOCK_EXPORTER_BINARY:?set PGLOCK_EXPORTER_BINARY to the exporter to measure}
old_bin=${BENCH_OLD_BINARY:-}
out_md=${BENCH_OUT:-$here/results/scale-latest.md}
out_tsv=${out_md%.md}.tsv
interval=${BENCH_INTERVAL:-5}
window=${BENCH_WINDOW:-30}
scrapes=${BENCH_SCRAPES:-100}

tmp=$(mktemp -d)
mkdir -p "$tmp/logs"
idle_pids=() idle_fds=()
exporter_pid=''
cleanup() {
  [[ -n $exporter_pid ]] && kill "$exporter_pid" 2>/dev/null
  for fd in "${idle_fds[@]}"; do exec {fd}>&-; done
  for p in "${idle_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  pg_stop immediate
  if [[ ${BENCH_KEEP:-0} == 1 ]]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

pg_find_bin
pg_init "$tmp" "$tmp/logs"
pg_start "max_connections = 450"
dsn_base="host=127.0.0.1 port=$PG_PORT user=postgres"
rm -f "$out_tsv"

db() { printf 'db%04d' "$1"; }

# Runs the exporter $5 on config $2 and measures it as scenario $1 with $3 targets, $4 databases.
run_one() {
  local name=$1 config=$2 targets=$3 databases=$4 bin=$5 port
  port=$(free_port 127.0.0.1)
  "$bin" --config.file="$config" --web.listen-address="127.0.0.1:$port" --log.level=warn \
    >"$tmp/logs/$name.log" 2>&1 &
  exporter_pid=$!
  python3 "$here/scale.py" measure --url "http://127.0.0.1:$port/metrics" --pid "$exporter_pid" \
    --name "$name" --targets "$targets" --databases "$databases" --interval "$interval" \
    --window "$window" --scrapes "$scrapes" --out "$out_tsv" \
    --backends-cmd "$(printf '%q ' "$PG_BIN/psql") -X -At -h 127.0.0.1 -p $PG_PORT -U postgres -d postgres -c \"SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE application_name = 'pglock_exporter'\""
  kill "$exporter_pid"
  wait "$exporter_pid" || true
  exporter_pid=''
  echo "$name: $(grep -c 'poll the same PostgreSQL server' "$tmp/logs/$name.log" || true) duplicate-server warning lines"
}
# The scenario for the old binary (when given), then for the new one.
run() {
  if [[ -n $old_bin ]]; then
    run_one "$1 (old)" "$2" "$3" "$4" "$old_bin"
    run_one "$1 (new)" "$2" "$3" "$4" "$bin"
  else
    run_one "$1" "$2" "$3" "$4" "$bin"
  fi
}

poll_section() { printf '[poll]\ninterval = "%ss"\n' "$interval"; }
target() { printf '[[targets]]\nname = "%s"\ndsn = "%s dbname=%s"\n' "$1" "$dsn_base" "$2"; }

# --- 1 database --------------------------------------------------------------------------------
{ poll_section; target main postgres; } >"$tmp/one.toml"
run 1db "$tmp/one.toml" 1 3

# --- 1,000 idle databases ----------------------------------------------------------------------
# FILE_COPY: no WAL for the copied files (fsync is off), fast for 1,000 copies of template0.
for i in $(seq 1 1000); do
  echo "CREATE DATABASE $(db "$i") TEMPLATE template0 STRATEGY FILE_COPY;"
done >"$tmp/create.sql"
time pg_psql -d postgres -f "$tmp/create.sql" >/dev/null
# An idle session: psql reading a fifo that this script keeps open and never writes.
for i in 996 997 998 999 1000; do
  mkfifo "$tmp/idle$i"
  "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$(db "$i")" <"$tmp/idle$i" &
  idle_pids+=($!)
  exec {fd}>"$tmp/idle$i"  # held open until the script exits
  idle_fds+=("$fd")
done
run 1000db "$tmp/one.toml" 1 1003

# --- 200 databases: 200 targets against one --------------------------------------------------
for p in "${idle_pids[@]}"; do kill "$p" 2>/dev/null || true; done
idle_pids=()
for i in $(seq 201 1000); do echo "DROP DATABASE $(db "$i") WITH (FORCE);"; done >"$tmp/drop.sql"
pg_psql -d postgres -f "$tmp/drop.sql" >/dev/null
for i in $(seq 1 200); do
  pg_psql -d "$(db "$i")" -c "CREATE TABLE leases (name text PRIMARY KEY, holder text NOT NULL,
    taken_at timestamptz NOT NULL, expires_at timestamptz NOT NULL);
    INSERT INTO leases VALUES ('job', 'worker-$i', now(), now() + interval '1 day')"
done
run 200db-1t "$tmp/one.toml" 1 203
{
  poll_section
  for i in $(seq 1 200); do
    target "$(db "$i")" "$(db "$i")"
    printf '  [[targets.leases]]\n  table = "leases"\n'
  done
} >"$tmp/per-db.toml"
run 200db-200t "$tmp/per-db.toml" 200 203
{
  poll_section
  target main postgres
  for i in $(seq 1 200); do
    printf '  [[targets.leases]]\n  table = "leases"\n  database = "%s"\n' "$(db "$i")"
  done
} >"$tmp/leases.toml"
run_one "200db-1t-leases${old_bin:+ (new)}" "$tmp/leases.toml" 1 203 "$bin"  # database =: new only

version=$("$bin" --version 2>&1 | head -n 1)
python3 "$here/scale.py" report --tsv "$out_tsv" --out "$out_md" --header "# Scale benchmark

- date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs, shared with other work
- PostgreSQL: $PG_VERSION; exporter (new): $version${old_bin:+; old: $("$old_bin" --version 2>&1 | head -n 1)}
- poll interval ${interval}s, CPU window ${window}s without scrapes, $scrapes sequential gzip scrapes
- cpu / server cpu: CPU time (schedstat, all threads) of the exporter / of its backends, per poll round"
cat "$out_md"
