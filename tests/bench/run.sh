#!/usr/bin/env bash
# Performance benchmark of pglock_exporter (see tests/bench/README.md). Not part of the default test
# run. It starts a throwaway PostgreSQL in a temporary directory on a free port, loads it with a
# realistic heavy case (about 250 sessions, 1k / 20k / 100k held advisory locks, 20 and 200 waiters,
# 50 idle-in-transaction holders, a 1,000-row lease table), and measures, side by side in one run:
#
#   - poll cost: pglock_poll_duration_seconds of a full poll (pg_locks inventory every poll) and of a
#     tiered poll (inventory every 60 s), CPU per poll of the exporter and of its server backend, next
#     to the floor (pg_locks JOIN pg_stat_activity read by psql over the same kind of connection) and
#     next to a scrape of postgres_exporter (Debian prometheus-postgres-exporter, default collectors);
#   - the cost of each of the exporter's queries on its own (psql \timing);
#   - workload impact: pgbench TPS of pg_advisory_xact_lock on random keys with no exporter, ours at
#     1 s and 100 ms, postgres_exporter scraped every 1 s and 100 ms (rounds interleaved);
#   - the scrape path: wrk, 50 connections, against /metrics while polling;
#   - memory: exporter RSS and /metrics size at each scale point.
#
# Prints the tables and writes them to tests/bench/results/latest.md (raw samples beside it in
# latest.tsv). Everything it starts is stopped and its temporary directory removed on exit.
#
# Environment:
#   BENCH_QUICK=1            smoke run: small scale points, short durations (about 9 minutes)
#   PGLOCK_EXPORTER_BINARY   exporter to measure (default: build it Release into <repo>/build-bench)
#   BENCH_OUT                output file (default: tests/bench/results/latest.md)
#   BENCH_KEEP=1             keep the temporary directory (logs, configs) on exit
#   PGLOCK_PG_BINDIR         PostgreSQL server binaries (default: the newest /usr/lib/postgresql/*/bin)
# Needs (Debian packages, `scripts/install-deps.sh bench`): postgresql-15 (server, psql, pgbench),
# prometheus-postgres-exporter, wrk, curl, python3. Runs PostgreSQL as `postgres` when run as root
# (scripts/lib/pg.sh).
set -euo pipefail
export LC_ALL=C

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd -- "$here/../.." && pwd)
# shellcheck source=scripts/lib/pg.sh
source "$repo/scripts/lib/pg.sh"
# shellcheck source=scripts/lib/bg.sh
source "$repo/scripts/lib/bg.sh"
PGE=/usr/bin/prometheus-postgres-exporter
out_md=${BENCH_OUT:-$here/results/latest.md}
out_tsv=${out_md%.md}.tsv

# --- scale and durations -------------------------------------------------------------------------------
# A point is ID:HELD_LOCKS:WAITERS. The workload and wrk run at WORK_POINT.
if [[ ${BENCH_QUICK:-0} == 1 ]]; then
  quick=1
  points=(q300:300:5 q3k:3000:5 q15k:15000:5 q15k-40w:15000:40 q15k-0w:15000:0)
  work_point=q3k
  iit=10 idle=40 leases=100
  polls=6 cpu_window=15 floor_n=8 query_n=5 pge_n=12
  pgb_secs=5 rounds=1 wrk_secs=3 toggle_secs=24 toggle_win=4
else
  quick=0
  # The last point has no waiter: what a tiered poll costs when nobody waits.
  points=(1k:1000:20 20k:20000:20 100k:100000:20 100k-200w:100000:200 100k-0w:100000:0)
  work_point=20k
  # ~254 client sessions: 4 lock holders + 50 idle-in-transaction holders + 200 sessions that are
  # either waiters or idle pool sessions (20 waiters + 180 idle, 200 waiters, or 200 idle).
  iit=50 idle=200 leases=1000
  polls=25 cpu_window=20 floor_n=15 query_n=10 pge_n=10
  pgb_secs=15 rounds=2 wrk_secs=10 toggle_secs=60 toggle_win=4
fi
pgb_clients=4
max_keys_per_holder=40000
held_base=1000000000 # held session locks: bigint keys from here, two-int keys (42, n) for even holders
iit_base=2000000000  # idle-in-transaction holders' keys; pgbench uses 1..100000: no key is shared

t0=$EPOCHREALTIME
say() { printf '[bench %6ss] %s\n' "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')" "$*" >&2; }
die() {
  printf '\nbench: FAILED: %s\n' "$*" >&2
  exit 1
}

# --- prerequisites and build ---------------------------------------------------------------------------
pg_find_bin || exit 1
PSQL=$PG_BIN/psql
PGBENCH=$PG_BIN/pgbench
for tool in "$PGBENCH" "$PGE" wrk curl python3; do
  command -v "$tool" >/dev/null || die "$tool not found: run scripts/install-deps.sh bench"
done
if [[ -n ${PGLOCK_EXPORTER_BINARY:-} ]]; then
  exporter=$PGLOCK_EXPORTER_BINARY
else
  exporter=$repo/build-bench/pglock_exporter
  say "building the exporter (Release) into $repo/build-bench"
  BUILD_DIR=$repo/build-bench BUILD_TYPE=Release "$repo/scripts/build.sh" -DPGLOCK_BUILD_TESTS=OFF >&2 ||
    die "build failed"
fi
[[ -x $exporter ]] || die "no exporter binary at $exporter"

# --- process bookkeeping and cleanup -------------------------------------------------------------------
# Background processes: start_bg / stop_pid / stop_named (scripts/lib/bg.sh).
tmp=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  [[ -n $tmp && -d $tmp ]] || exit "$rc"
  if ((rc != 0)); then
    local f
    for f in "$tmp"/logs/*.log; do
      [[ -s $f ]] || continue
      printf '\n---- %s (last lines) ----\n' "${f##*/}" >&2
      tail -n 8 "$f" >&2
    done
  fi
  local i
  for ((i = ${#bg_pids[@]} - 1; i >= 0; i--)); do stop_pid "${bg_pids[i]}"; done
  pg_stop immediate
  if [[ ${BENCH_KEEP:-0} == 1 ]]; then echo "bench: kept $tmp" >&2; else rm -rf -- "$tmp"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pglock-bench.XXXXXX")
mkdir -p "$tmp/logs" "$tmp/sql"
chmod 755 "$tmp"
logs=$tmp/logs
raw=$tmp/raw.tsv
: >"$raw"
# One raw sample: SECTION POINT METRIC VALUE (report.py aggregates them).
rec() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$raw"; }

# --- PostgreSQL ----------------------------------------------------------------------------------------
pg_init "$tmp" "$logs" --auth=trust || die "initdb failed"
pg_port=$PG_PORT
say "PostgreSQL $PG_VERSION on 127.0.0.1:$pg_port in $tmp"
pg_start "max_connections = 300" \
  "max_locks_per_transaction = 1024   # lock table: 1024 x 300 slots, room for 100k advisory locks" \
  "shared_buffers = 128MB" "log_min_messages = warning" || die "PostgreSQL did not start"

sql() { pg_psql -d postgres -A -t "$@"; }
exporter_dsn="host=127.0.0.1 port=$pg_port dbname=postgres user=pglock_exporter"
app_conn="host=127.0.0.1 port=$pg_port dbname=postgres user=app"

sql >"$logs/setup.log" <<SQL
CREATE ROLE pglock_exporter LOGIN;
GRANT pg_monitor TO pglock_exporter;
CREATE ROLE postgres_exporter LOGIN;
GRANT pg_monitor TO postgres_exporter;
CREATE ROLE app LOGIN;
CREATE TABLE leases (
  name       text PRIMARY KEY,
  holder     text NOT NULL,
  taken_at   timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
-- $leases leases, one in ten expired.
INSERT INTO leases
SELECT format('job-%s', i), format('worker-%s.example:%s:%s', i % 17, 1000 + i, md5(i::text)),
       now() - (i % 600) * interval '1 second',
       now() + CASE WHEN i % 10 = 0 THEN -1 ELSE 1 END * interval '1 hour'
FROM generate_series(1, $leases) i;
GRANT SELECT ON leases TO pglock_exporter;
SQL
pg_version=$(sql -c "SELECT version()")

# --- client sessions -----------------------------------------------------------------------------------
# A group of sessions is one bash running one psql pipeline per SQL file in $tmp/sql/NAME/, each
# kept connected by a sleeping writer after its statements ran.
start_group() { # NAME [DIR]
  start_bg "$1" "$logs/sessions-$1.log" bash -c '
    shopt -s nullglob
    for f in "$1"/*.sql; do
      { cat "$f"; exec sleep 1000000; } | "$2" -X -q -v ON_ERROR_STOP=1 "$3" >/dev/null &
    done
    wait' _ "$tmp/sql/${2:-$1}" "$PSQL" "$app_conn"
}
wait_for() { # DESCRIPTION SQL_RETURNING_t [SECONDS]
  local i limit=$((${3:-120} * 10))
  for ((i = 0; i < limit; i++)); do
    [[ $(sql -c "$2") == t ]] && return 0
    sleep 0.1
  done
  die "timed out waiting for $1"
}
held_count() { sql -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid IN (SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'batch-%')"; }
advisory_waiters() { sql -c "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'"; }

holders=0 held=0
add_holders() { # TARGET_HELD
  local target=$1 from to name
  while ((held < target)); do
    from=$((held + 1))
    to=$((target < held + max_keys_per_holder ? target : held + max_keys_per_holder))
    holders=$((holders + 1))
    name=holder$holders
    mkdir -p "$tmp/sql/$name"
    if ((holders % 2 == 1)); then
      lock="pg_advisory_lock($held_base + k)"
    else
      lock="pg_advisory_lock(42, k)"
    fi
    printf "SET application_name = 'batch-%s';\nDO \$\$BEGIN PERFORM %s FROM generate_series(%s, %s) k; END\$\$;\n" \
      "$holders" "$lock" "$from" "$to" >"$tmp/sql/$name/s.sql"
    start_group "$name"
    held=$to
  done
  local i
  for ((i = 0; i < 1200; i++)); do
    (($(held_count) >= target)) && return 0
    sleep 0.1
  done
  die "holders did not take $target locks"
}
make_sessions() { # NAME FIRST LAST TEMPLATE(printf, %s = index)
  local name=$1 i
  mkdir -p "$tmp/sql/$name"
  for ((i = $2; i <= $3; i++)); do
    # shellcheck disable=SC2059
    printf "$4" "$i" "$i" >"$tmp/sql/$name/$(printf '%05d' "$i").sql"
  done
}

say "starting $iit idle-in-transaction holders"
make_sessions iit 1 "$iit" "SET application_name = 'worker-%s';\nBEGIN;\nSELECT pg_advisory_xact_lock($iit_base + %s);\n"
start_group iit
wait_for "idle-in-transaction holders" \
  "SELECT count(*) = $iit FROM pg_stat_activity WHERE state = 'idle in transaction' AND application_name LIKE 'worker-%'"

# $idle sessions are either waiters (each blocked on its own key held by holder 1) or idle pool
# sessions: changing the number of waiters restarts both groups.
waiters=-1
set_waiters() { # N
  local target=$1
  ((target != waiters)) || return 0
  stop_named waiters
  stop_named pool
  # A backend blocked in a lock wait does not notice that its client went away: end it.
  sql -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name LIKE 'waiter-%'" >/dev/null
  wait_for "waiters and pool sessions gone" \
    "SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name LIKE 'pool-%' OR application_name LIKE 'waiter-%'"
  make_sessions "waiters$target" 1 "$target" "SET application_name = 'waiter-%s';\nSELECT pg_advisory_lock($held_base + %s);\n"
  make_sessions "pool$target" 1 $((idle - target)) "SET application_name = 'pool-%s';\nSELECT %s;\n"
  start_group waiters "waiters$target"
  start_group pool "pool$target"
  waiters=$target
  wait_for "$target waiters" "SELECT count(*) = $target FROM pg_stat_activity WHERE wait_event = 'advisory'"
  wait_for "$((idle - target)) pool sessions" \
    "SELECT count(*) = $((idle - target)) FROM pg_stat_activity WHERE application_name LIKE 'pool-%' AND state = 'idle'"
}

# --- measurement helpers -------------------------------------------------------------------------------
# Time series of one psql session: prints the \timing of each statement, in ms.
psql_times() { # STATEMENT COUNT   (one warm-up run is not reported)
  local i
  {
    echo '\timing on'
    echo '\o /dev/null'
    for ((i = 0; i <= $2; i++)); do printf '%s;\n' "$1"; done
  } | "$PSQL" -X -q -v ON_ERROR_STOP=1 "$exporter_dsn application_name=bench_psql" 2>>"$logs/psql.log" |
    awk '/^Time: / { print $2 }' | tail -n +2
}
# The floor: every advisory lock with its session's identity and timings. usename is left out: it
# makes pg_stat_activity look up pg_authid once per lock row (floor_with_usename in the per-query
# table shows that variant), so this is the cheapest form of the join.
floor_cols="l.pid, l.database, l.classid, l.objid, l.objsubid, l.mode, l.granted, l.waitstart,
  a.application_name, a.client_addr, a.state, a.xact_start, a.state_change"
floor_sql="SELECT $floor_cols FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory'"
floor_usename_sql="SELECT $floor_cols, a.usename FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory'"
measure_floor() { # POINT
  local t
  for t in $(psql_times "$floor_sql" "$floor_n"); do rec floor "$1" ms "$t"; done
}
query_sql() { # FILE [INVENTORY]: a query of queries/ as one statement, its templates filled in
  sed -e 's/--.*$//' "$repo/queries/$1" | sed -e 's/{name}/name/; s/{holder}/holder/; s/{taken_at}/taken_at/g' \
    -e 's/{expires_at}/expires_at/g; s/{table}/public.leases/; s/{limit}/1000/' \
    -e "s/{waitstart}/extract(epoch FROM l.waitstart)::float8/; s/{inventory}/${2:-true}/g; s/{xids}/false/g" \
    -e 's/{query}/NULL::text/' | tr '\n' ' '
}
measure_queries() { # POINT
  local q t
  for q in settings server_info activity setting_overrides database_stats advisory_locks lease_table; do
    for t in $(psql_times "$(query_sql "$q.sql")" "$query_n"); do rec query "$1" "$q" "$t"; done
  done
  # The tiered form of the pg_locks read.
  for t in $(psql_times "$(query_sql advisory_locks.sql false)" "$query_n"); do
    rec query "$1" advisory_waiters "$t"
  done
  for t in $(psql_times "$floor_usename_sql" "$query_n"); do rec query "$1" floor_with_usename "$t"; done
}

cpu_ns() { # PID...: CPU time (user+system, ns) of every thread of these processes
  local pid f a sum=0
  for pid in "$@"; do
    for f in /proc/"$pid"/task/*/schedstat; do
      read -r a _ <"$f" 2>/dev/null && sum=$((sum + a))
    done
  done
  echo "$sum"
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

exp_port=$(free_port)
exp_url=http://127.0.0.1:$exp_port
exp_pid=
start_exporter() { # NAME INTERVAL INVENTORY_INTERVAL [noleases]
  cat >"$tmp/$1.toml" <<EOF
# written by tests/bench/run.sh
[poll]
interval = "$2"
timeout = "$2"   # the longest the exporter allows (timeout <= interval)
top_n = 20
max_leases = 1000
inventory_interval = "$3"

[[targets]]
name = "bench"
dsn = "$exporter_dsn"

  [[targets.locks]]
  name = "nightly-report"
  key = $((held_base + 1))
  [[targets.locks]]
  name = "rebuild"
  key1 = 42
  key2 = 1
EOF
  if [[ ${4:-} != noleases ]]; then
    cat >>"$tmp/$1.toml" <<EOF

  [[targets.leases]]
  table = "public.leases"
  holder_pattern = '^([^:]+):([0-9]+):'
  holder_labels = ["holder_host", "holder_pid"]
EOF
  fi
  start_bg exporter "$logs/exporter.log" "$exporter" --config.file="$tmp/$1.toml" \
    --web.listen-address="127.0.0.1:$exp_port" --log.level=info
  exp_pid=$last_bg
  local i
  for ((i = 0; i < 300; i++)); do
    curl -fsS "$exp_url/metrics" 2>/dev/null | grep '^pglock_up{target="bench"} 1' >/dev/null && return 0
    kill -0 "$exp_pid" 2>/dev/null || die "the exporter exited"
    sleep 0.1
  done
  die "the exporter is not up after 30 s"
}
stop_exporter() {
  stop_named exporter
  exp_pid=
}
poll_state() { # -> "LAST_SUCCESS DURATION UP"
  curl -s --max-time 10 "$exp_url/metrics" | awk '
    /^pglock_poll_duration_seconds\{/ { d = $2 }
    /^pglock_last_poll_success_timestamp_seconds\{/ { t = $2 }
    /^pglock_up\{/ { u = $2 }
    END { print t, d, u }'
}
exporter_backend() {
  sql -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'pglock_exporter' AND backend_type = 'client backend'"
}

# Samples N consecutive polls (each read once, just after it ends, by its completion timestamp), then
# measures CPU per poll over a window with no scrapes, RSS and the /metrics size.
measure_exporter() { # POINT MODE INTERVAL_S INVENTORY
  local point=$1 mode=$2 interval=$3 inventory=$4
  start_exporter "$mode" "${interval}s" "$inventory"
  local ts d up last="" got=-2 deadline # the first two polls (connect, first inventory) are skipped
  deadline=$((SECONDS + 60 + polls * 3))
  while ((got < polls)); do
    ((SECONDS < deadline)) || die "$mode: polls stopped"
    read -r ts d up < <(poll_state)
    if [[ -n $ts && $ts != "$last" ]]; then
      [[ $up == 1 ]] || die "$mode: pglock_up is $up"
      ((got >= 0)) && [[ -n $last ]] && rec "poll_$mode" "$point" ms "$(awk -v d="$d" 'BEGIN { print d * 1000 }')"
      [[ -n $last ]] && got=$((got + 1))
      last=$ts
      # Next completion is about one interval later: sleep until just after it.
      sleep "$(awk -v ts="$ts" -v now="$EPOCHREALTIME" -v i="$interval" 'BEGIN { s = ts + i + 0.01 - now; if (s < 0.01) s = 0.01; print s }')"
    else
      sleep 0.02
    fi
  done
  # CPU window: no scrape in between (the two poll_state reads bracket it).
  local backend ts0 ts1 c0 c1 b0 b1 dur_med n
  backend=$(exporter_backend)
  read -r ts0 _ _ < <(poll_state)
  c0=$(cpu_ns "$exp_pid")
  b0=$(cpu_ns "$backend")
  sleep "$cpu_window"
  read -r ts1 _ _ < <(poll_state)
  c1=$(cpu_ns "$exp_pid")
  b1=$(cpu_ns "$backend")
  [[ $(exporter_backend) == "$backend" ]] || die "$mode: the exporter reconnected during the CPU window"
  dur_med=$(awk -v p="$point" -v m="poll_$mode" -F'\t' '$1 == m && $2 == p { print $4 }' "$raw" | sort -g |
    awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] / 1000 }')
  n=$(awk -v a="$ts0" -v b="$ts1" -v i="$interval" -v d="$dur_med" 'BEGIN { p = (d > i) ? d : i; printf "%d", (b - a) / p + 0.5 }')
  ((n > 0)) || die "$mode: no poll in the CPU window"
  rec "poll_$mode" "$point" polls_in_window "$n"
  rec "poll_$mode" "$point" cpu_ms "$(awk -v a="$c0" -v b="$c1" -v n="$n" 'BEGIN { print (b - a) / n / 1e6 }')"
  rec "poll_$mode" "$point" backend_cpu_ms "$(awk -v a="$b0" -v b="$b1" -v n="$n" 'BEGIN { print (b - a) / n / 1e6 }')"
  rec "poll_$mode" "$point" rss_kb "$(rss_kb "$exp_pid")"
  curl -s "$exp_url/metrics" >"$tmp/metrics-$mode-$point.txt"
  rec "poll_$mode" "$point" metrics_bytes "$(wc -c <"$tmp/metrics-$mode-$point.txt")"
  rec "poll_$mode" "$point" metrics_series "$(grep -vc '^#' "$tmp/metrics-$mode-$point.txt")"
  rec "poll_$mode" "$point" lease_series "$(grep -c '^pglock_lease' "$tmp/metrics-$mode-$point.txt")"
  curl -s -H 'Accept-Encoding: gzip' "$exp_url/metrics" -o "$tmp/metrics.gz"
  rec "poll_$mode" "$point" metrics_gzip_bytes "$(wc -c <"$tmp/metrics.gz")"
  # What the poll saw: waiters and idle-in-transaction lock holders (summed over databases).
  rec "poll_$mode" "$point" seen_waiters \
    "$(awk '/^pglock_advisory_lock_waiters\{/ { s += $2 } END { print s + 0 }' "$tmp/metrics-$mode-$point.txt")"
  rec "poll_$mode" "$point" seen_iit_holders \
    "$(awk '/^pglock_idle_in_transaction_lock_holders\{/ { s += $2 } END { print s + 0 }' "$tmp/metrics-$mode-$point.txt")"
  rec "poll_$mode" "$point" seen_held \
    "$(awk '/^pglock_advisory_locks_held\{/ { s += $2 } END { print s + 0 }' "$tmp/metrics-$mode-$point.txt")"
  stop_exporter
}

# postgres_exporter: started once, idle between scrapes (it queries only when scraped).
pge_port=$(free_port)
pge_url=http://127.0.0.1:$pge_port/metrics
start_bg postgres_exporter "$logs/postgres_exporter.log" env \
  DATA_SOURCE_NAME="host=127.0.0.1 port=$pg_port dbname=postgres user=postgres_exporter sslmode=disable application_name=postgres_exporter" \
  "$PGE" --web.listen-address="127.0.0.1:$pge_port"
pge_pid=$last_bg
for ((i = 0; ; i++)); do
  curl -fsS "$pge_url" 2>/dev/null | grep '^pg_up 1' >/dev/null && break
  ((i < 300)) || die "postgres_exporter does not report pg_up 1"
  sleep 0.1
done
measure_pge() { # POINT
  local i t backends c0 c1 b0 b1
  curl -s -o /dev/null "$pge_url" # warm
  backends=$(sql -c "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE application_name = 'postgres_exporter'")
  c0=$(cpu_ns "$pge_pid")
  # shellcheck disable=SC2086
  b0=$(cpu_ns $backends)
  for ((i = 0; i < pge_n; i++)); do
    t=$(curl -s -o "$tmp/pge.txt" -w '%{time_total}' "$pge_url")
    rec pge "$1" ms "$(awk -v t="$t" 'BEGIN { print t * 1000 }')"
    sleep 0.2
  done
  c1=$(cpu_ns "$pge_pid")
  # shellcheck disable=SC2086
  b1=$(cpu_ns $backends)
  rec pge "$1" cpu_ms "$(awk -v a="$c0" -v b="$c1" -v n="$pge_n" 'BEGIN { print (b - a) / n / 1e6 }')"
  rec pge "$1" backend_cpu_ms "$(awk -v a="$b0" -v b="$b1" -v n="$pge_n" 'BEGIN { print (b - a) / n / 1e6 }')"
  rec pge "$1" metrics_bytes "$(wc -c <"$tmp/pge.txt")"
  rec pge "$1" rss_kb "$(rss_kb "$pge_pid")"
}

# --- workload impact -----------------------------------------------------------------------------------
printf '\\set k random(1, 100000)\nSELECT pg_advisory_xact_lock(:k);\n' >"$tmp/advisory.sql"
pgbench_tps() {
  "$PGBENCH" -n -M prepared -c "$pgb_clients" -j 2 -T "$pgb_secs" -f "$tmp/advisory.sql" \
    -h "$PG_SOCKET" -p "$pg_port" -U postgres postgres 2>>"$logs/pgbench.log" |
    tee -a "$logs/pgbench.log" | awk '/^tps = / { print $3 }'
}
scrape_loop() { # PERIOD: scrapes postgres_exporter every PERIOD seconds, logging each scrape's time
  start_bg pge_loop "$logs/pge_loop.log" bash -c '
    while :; do curl -s -o /dev/null -w "%{time_total}\n" --max-time 30 "$1" >>"$2"; sleep "$3"; done' \
    _ "$pge_url" "$tmp/pge_loop_times.txt" "$1"
}
run_workload() { # POINT
  local configs=(none ours_1s ours_100ms ours_100ms_tiered pge_1s pge_100ms) r k c tps
  for ((r = 1; r <= rounds; r++)); do
    for ((k = 0; k < ${#configs[@]}; k++)); do
      c=${configs[(k + r - 1) % ${#configs[@]}]} # rotate the order each round
      : >"$tmp/pge_loop_times.txt"
      case $c in
        none) ;;
        ours_1s) start_exporter "$c" 1s 0s ;;
        ours_100ms) start_exporter "$c" 100ms 0s ;;
        ours_100ms_tiered) start_exporter "$c" 100ms 60s ;;
        pge_1s) scrape_loop 1 ;;
        pge_100ms) scrape_loop 0.1 ;;
      esac
      sleep 1
      tps=$(pgbench_tps)
      [[ -n $tps ]] || die "pgbench failed (see $logs/pgbench.log)"
      rec workload "$1" "$c" "$tps"
      say "  round $r $c: $tps tps"
      if [[ $c == ours_* ]]; then
        rec workload_poll_errors "$1" "$c" "$(curl -s "$exp_url/metrics" | awk '/^pglock_poll_errors_total\{/ { print $2 }')"
      fi
      if [[ $c == pge_* ]]; then
        rec workload_scrapes "$1" "$c" "$(wc -l <"$tmp/pge_loop_times.txt")"
        awk '{ print $1 * 1000 }' "$tmp/pge_loop_times.txt" | while read -r t; do rec pge_under_load "$1" "$c" "$t"; done
      fi
      stop_named pge_loop
      stop_exporter
    done
  done
}

# Paired on/off: one pgbench run of toggle_secs with per-second progress, while the exporter (or the
# scrape loop) is alternately stopped (SIGSTOP) and running (SIGCONT) in windows of toggle_win
# seconds, off first. Nearby seconds share the machine's background load, so comparing each "on"
# window with the "off" windows on either side cancels most of the drift that separate runs see.
# Records the mean TPS of each window, leaving out its first second (the transition).
toggle_run() { # POINT CONFIG PGID
  local point=$1 config=$2 pgid=$3 w start bpid
  kill -STOP -- "-$pgid"
  "$PGBENCH" -n -M prepared -c "$pgb_clients" -j 2 -T "$toggle_secs" -P 1 -f "$tmp/advisory.sql" \
    -h "$PG_SOCKET" -p "$pg_port" -U postgres postgres >>"$logs/pgbench.log" 2>"$tmp/progress.txt" &
  bpid=$!
  start=$EPOCHREALTIME
  for ((w = 1; w * toggle_win < toggle_secs; w++)); do
    sleep "$(awk -v s="$start" -v now="$EPOCHREALTIME" -v t=$((w * toggle_win)) 'BEGIN { d = s + t - now; print (d > 0 ? d : 0) }')"
    if ((w % 2 == 1)); then kill -CONT -- "-$pgid"; else kill -STOP -- "-$pgid"; fi
  done
  wait "$bpid" || die "pgbench failed (see $tmp/progress.txt)"
  kill -CONT -- "-$pgid"
  cat "$tmp/progress.txt" >>"$logs/pgbench.log"
  # "progress: 5.0 s, 61234.5 tps, lat ..." covers second 4..5.
  awk -v win="$toggle_win" -v p="$point" -v c="$config" '
    /^progress: / {
      sec = int($2 + 0.5) - 1; w = int(sec / win)
      if (sec % win == 0) next
      sum[w] += $4; n[w]++
    }
    END { for (w in sum) printf "toggle\t%s\t%s:%d:%s\t%s\n", p, c, w, (w % 2 ? "on" : "off"), sum[w] / n[w] }
  ' "$tmp/progress.txt" >>"$raw"
}
psql_loop() { # STATEMENT: one psql session running STATEMENT once a second
  start_bg psql_loop "$logs/psql_loop.log" bash -c '
    { while :; do printf "%s;\n" "$1"; sleep 1; done; } | "$2" -X -q -o /dev/null "$3"' \
    _ "$1" "$PSQL" "$exporter_dsn application_name=bench_loop"
}
run_toggle() { # POINT
  local c
  # control: what the method reads when the toggled process does (almost) nothing;
  # floor: the bare pg_locks JOIN pg_stat_activity read once a second.
  for c in control_1s floor_1s ours_1s pge_1s ours_100ms pge_100ms ours_100ms_tiered; do
    case $c in
      control_1s) psql_loop "SELECT 1" ;;
      floor_1s) psql_loop "$floor_sql" ;;
      ours_1s) start_exporter "$c" 1s 0s ;;
      ours_100ms) start_exporter "$c" 100ms 0s ;;
      ours_100ms_tiered) start_exporter "$c" 100ms 60s ;;
      pge_1s) scrape_loop 1 ;;
      pge_100ms) scrape_loop 0.1 ;;
    esac
    sleep 1
    if [[ $c == ours_* ]]; then toggle_run "$1" "$c" "$exp_pid"; else toggle_run "$1" "$c" "$last_bg"; fi
    say "  paired on/off $c done"
    stop_named psql_loop
    stop_named pge_loop
    stop_exporter
  done
}

run_wrk() { # POINT
  local enc label variant
  for variant in leases noleases; do
    start_exporter "wrk-$variant" 1s 0s "$variant"
    for enc in identity gzip; do
      [[ $variant == noleases && $enc == gzip ]] && continue
      wrk_one "$1" "$enc" "$([[ $variant == leases ]] && echo "$enc" || echo "$enc-noleases")"
    done
    read -r _ _ label < <(poll_state)
    [[ $label == 1 ]] || die "the exporter was down during wrk"
    rec wrk "$1" "${variant}_bytes" "$(curl -s "$exp_url/metrics" | wc -c)"
    rec wrk "$1" "${variant}_rss_kb" "$(rss_kb "$exp_pid")"
    stop_exporter
  done
}
wrk_one() { # POINT ENCODING LABEL
  local enc=$2
  wrk -t2 -c50 -d"${wrk_secs}s" --latency -H "Accept-Encoding: $enc" "$exp_url/metrics" >"$tmp/wrk-$enc.txt" 2>&1 ||
      die "wrk failed: $(cat "$tmp/wrk-$enc.txt")"
    cat "$tmp/wrk-$enc.txt" >>"$logs/wrk.log"
    # Latency distribution lines: "50%  1.23ms"; Requests/sec; errors.
    awk -v enc="$3" -v p="$1" '
      function ms(v) { if (v ~ /us$/) return v * 0.001; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
      $1 == "50%" { printf "wrk\t%s\t%s_p50_ms\t%s\n", p, enc, ms($2) }
      $1 == "90%" { printf "wrk\t%s\t%s_p90_ms\t%s\n", p, enc, ms($2) }
      $1 == "99%" { printf "wrk\t%s\t%s_p99_ms\t%s\n", p, enc, ms($2) }
      $1 == "Requests/sec:" { printf "wrk\t%s\t%s_rps\t%s\n", p, enc, $2 }
      /Non-2xx/ { printf "wrk\t%s\t%s_non2xx\t%s\n", p, enc, $NF }
      /Socket errors/ { s = $0; sub(/^ *Socket errors: */, "", s); printf "wrk\t%s\t%s_socket_errors\t%s\n", p, enc, s }
    ' "$tmp/wrk-$enc.txt" >>"$raw"
}

# --- the run -------------------------------------------------------------------------------------------
for spec in "${points[@]}"; do
  IFS=: read -r point want_held want_waiters <<<"$spec"
  say "point $point: $want_held held advisory locks, $want_waiters waiters"
  add_holders "$want_held"
  set_waiters "$want_waiters"
  sleep 1
  rec meta "$point" held "$(sql -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")"
  rec meta "$point" waiters "$(advisory_waiters)"
  rec meta "$point" sessions "$(sql -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")"
  rec meta "$point" iit "$(sql -c "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'")"
  rec meta "$point" pg_locks_rows "$(sql -c "SELECT count(*) FROM pg_locks")"
  say "  floor and per-query costs"
  measure_floor "$point"
  measure_queries "$point"
  say "  full poll (inventory every poll)"
  measure_exporter "$point" full 1 0s
  say "  tiered poll (inventory every 60 s)"
  measure_exporter "$point" tiered 1 60s
  measure_floor "$point"
  say "  postgres_exporter scrapes"
  measure_pge "$point"
  if [[ $point == "$work_point" ]]; then
    say "  workload impact: pgbench ${pgb_secs}s x 6 configurations x $rounds rounds"
    run_workload "$point"
    say "  workload impact, paired: pgbench ${toggle_secs}s x 7 configurations, on/off every ${toggle_win}s"
    run_toggle "$point"
    say "  scrape path: wrk -t2 -c50 -d${wrk_secs}s"
    run_wrk "$point"
  fi
done

# --- report --------------------------------------------------------------------------------------------
mkdir -p "$(dirname "$out_md")"
cp "$raw" "$out_tsv"
python3 "$here/report.py" --raw "$raw" --out "$out_md" \
  --date "$(date -u '+%Y-%m-%d %H:%M UTC')" \
  --nproc "$(nproc)" \
  --cpu "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)" \
  --mem "$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)" \
  --pg-version "$pg_version" \
  --exporter-version "$("$exporter" --version 2>&1 | head -n 1)" \
  --pge-version "$("$PGE" --version 2>&1 | head -n 1)" \
  --quick "$quick" --work-point "$work_point" --pgbench "$pgb_clients clients, ${pgb_secs}s per run, $rounds rounds" \
  --toggle "$pgb_clients clients, one ${toggle_secs}s run per configuration, on/off windows of ${toggle_win}s" \
  --wrk-secs "$wrk_secs" --polls "$polls" --cpu-window "$cpu_window" --leases "$leases"
cat "$out_md"
say "done: $out_md (raw samples: $out_tsv)"
