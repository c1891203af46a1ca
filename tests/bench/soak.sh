#!/usr/bin/env bash
# Soak benchmark of pglock_exporter: does its cost follow the activity, not the history? One
# PostgreSQL 15 and one exporter (1 s polls, reading the server's jsonlog), idle minutes, then
# minutes of realistic lock traffic (advisory hand-overs, a job queue, losses and takeovers,
# deadlocks, blocking episodes, leases: tests/bench/soak.py says what each piece does), then idle
# minutes again; resident size, CPU per poll, /metrics series and the load average once a minute,
# and what the exporter recorded against what the workload did. A benchmark, not a test: not
# part of the default test run.
#
#   tests/bench/soak.sh [--minutes 30] [--idle 3] [--storage] [--full-history] [--callgrind]
#   # about minutes + 2 x idle + 2 minutes; --storage: with a state directory ([storage] path, as
#   # the Debian package and the Kubernetes base run it); --full-history: the same, its history
#   # at every bound from the start (the event log and the timeline full, written by
#   # build/tests/history_at_bounds and restored at the first poll: PGLOCK_HISTORY_TOOL);
#   # --callgrind: the exporter under valgrind's callgrind, for its instructions per poll in each
#   # phase (the work it does, whatever the host's caches and clock do to its CPU time; its CPU
#   # figures are then valgrind's, not the exporter's)
#
# Writes a Markdown report to stdout and to BENCH_OUT when set (the raw JSON beside it, .json).
# Environment: PGLOCK_EXPORTER_BINARY (default build/pglock_exporter; copied before the run, so a
# rebuild meanwhile changes nothing), BENCH_OUT, BENCH_KEEP=1 (keep the temporary directory: the
# exporter's log, the server's log, the workload's events.jsonl). Needs postgresql-15
# (scripts/install-deps.sh bench); as root, PostgreSQL runs as `postgres`.
set -euo pipefail
export LC_ALL=C

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd -- "$here/../.." && pwd)
# shellcheck source=scripts/lib/pg.sh
source "$repo/scripts/lib/pg.sh"
py=/usr/bin/python3
bin=${PGLOCK_EXPORTER_BINARY:-$repo/build/pglock_exporter}
minutes=30 idle=3 storage=0 full_history=0 callgrind=0
while (($#)); do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --idle) idle=$2; shift 2 ;;
    --storage) storage=1; shift ;;
    --full-history) storage=1 full_history=1; shift ;;
    --callgrind) callgrind=1; shift ;;
    *) echo "usage: $0 [--minutes N] [--idle N] [--storage] [--full-history] [--callgrind]" >&2
      exit 2 ;;
  esac
done
[[ -x $bin ]] || { echo "no exporter at $bin (set PGLOCK_EXPORTER_BINARY)" >&2; exit 2; }
if ((callgrind)) && ! command -v callgrind_control >/dev/null; then
  echo "--callgrind needs valgrind (apt-get install valgrind)" >&2; exit 2
fi
history_tool=${PGLOCK_HISTORY_TOOL:-$repo/build/tests/history_at_bounds}
if ((full_history)) && [[ ! -x $history_tool ]]; then
  echo "no $history_tool (cmake --build build --target history_at_bounds)" >&2; exit 2
fi

tmp=$(mktemp -d -t soak-bench.XXXXXX)
chmod 711 "$tmp"  # the postgres user must reach its data directory below
cp "$bin" "$tmp/pglock_exporter"
bin=$tmp/pglock_exporter
mkdir -p "$tmp/logs"
exporter_pid=''
cleanup() {
  set +e
  if [[ -n $exporter_pid ]]; then
    kill "$exporter_pid" 2>/dev/null
    wait "$exporter_pid" 2>/dev/null
  fi
  pg_stop immediate
  if [[ ${BENCH_KEEP:-0} == 1 ]]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# --- the server: the Debian PostgreSQL 15, its structured log as docs/server-log.md turns it on ---
pg_find_bin 15
pg_init "$tmp" "$tmp/logs"
pg_start "max_connections = 100" "logging_collector = on" "log_destination = 'stderr,jsonlog'" \
  "log_directory = 'log'" "log_file_mode = 0640" "log_disconnections = on" "log_lock_waits = on" \
  "lc_messages = 'C'"
pg_psql -d postgres <<'SQL'
CREATE ROLE pglock_exporter LOGIN;
GRANT pg_monitor TO pglock_exporter;
CREATE ROLE soak_app LOGIN;
CREATE ROLE soak_iit LOGIN;
CREATE DATABASE app OWNER soak_app;
-- A role whose sessions the server ends after 3 s idle in a transaction: the losses' second kind.
ALTER ROLE soak_iit IN DATABASE app SET idle_in_transaction_session_timeout = '3s';
\connect app
SET ROLE soak_app;
-- The leases table of scripts/demo/setup.sql, with 20 stable leases held throughout.
CREATE TABLE leases (
  name       text PRIMARY KEY,
  holder     text NOT NULL,
  taken_at   timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
INSERT INTO leases
  SELECT format('stable-%s', lpad(i::text, 2, '0')), format('host-s:%s:%s', 100 + i, md5(i::text)),
         now(), now() + interval '1 day'
  FROM generate_series(1, 20) i;
-- The job queue of docs/row-locks.md: claimed FOR UPDATE SKIP LOCKED, its queued rows indexed.
CREATE TABLE jobs (
  id         bigserial PRIMARY KEY,
  status     text NOT NULL DEFAULT 'queued',
  payload    text,
  created_at timestamptz NOT NULL DEFAULT now(),
  done_at    timestamptz
);
CREATE INDEX jobs_queued ON jobs (id) WHERE status = 'queued';
-- Rows that a blocking episode's root holds while two sessions wait to update them.
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts SELECT i, 0 FROM generate_series(1, 10) i;
RESET ROLE;
GRANT SELECT ON leases, jobs TO pglock_exporter;
SQL

# --- the exporter ----------------------------------------------------------------------------------
port=$(free_port 127.0.0.1)
cat >"$tmp/config.toml" <<TOML
[poll]
interval = "1s"

[[targets]]
name = "soak"
dsn = "host=127.0.0.1 port=$PG_PORT dbname=app user=pglock_exporter"

  [[targets.locks]]
  name = "billing-run"
  key_text = "billing-run"
  [[targets.locks]]
  name = "search-reindex"
  key_text = "search-reindex"
  [[targets.locks]]
  name = "nightly-report"
  key_text = "nightly-report"
  [[targets.locks]]
  name = "job-loop"
  key_text = "job-loop"

  [[targets.leases]]
  table = "leases"
  holder_pattern = '^([^:]+):([0-9]+):'
  holder_labels = ["holder_host", "holder_pid"]

  # The job queue as docs/row-locks.md configures it.
  [[targets.leases]]
  table = "jobs"
  name_column = "id"
  row_lock = true
  where_sql = "status = 'queued'"
  max_hold = "10m"
  queue = true

  [targets.server_log]
  path = "$PG_DATA/log"
  format = "jsonlog"
TOML
storage_flags=()
history_note=''
if ((storage)); then
  mkdir "$tmp/state"
  storage_flags=(--storage.path="$tmp/state")
fi
if ((full_history)); then
  # Keyed to this server as the exporter keys it (queries/server_identity.sql), stamped now.
  server_key=$(pg_psql -d postgres -Atc \
    "SELECT system_identifier || '|' || current_setting('port') FROM pg_control_system()")
  history_note=$("$history_tool" "$tmp/state" soak "$server_key" "$(date +%s.%N)")
fi
under=() callgrind_flags=()
if ((callgrind)); then
  under=(valgrind --tool=callgrind "--callgrind-out-file=$tmp/logs/callgrind.out")
  callgrind_flags=(--callgrind-out "$tmp/logs/callgrind.out")
fi
"${under[@]}" "$bin" --config.file="$tmp/config.toml" --web.listen-address="127.0.0.1:$port" \
  "${storage_flags[@]}" >"$tmp/logs/exporter.log" 2>&1 &
exporter_pid=$!

# --- the soak ----------------------------------------------------------------------------------------
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
json=${BENCH_OUT:+${BENCH_OUT%.md}.json}
json=${json:-$tmp/soak.json}
PGHOST=127.0.0.1 PGPORT=$PG_PORT PGDATABASE=app "$py" "$here/soak.py" run \
  --url "http://127.0.0.1:$port/metrics" --pid "$exporter_pid" --psql "$PG_BIN/psql" \
  --interval 1 --minutes "$minutes" --idle "$idle" --events-log "$tmp/logs/events.jsonl" \
  --json "$json" "${callgrind_flags[@]}"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
warnings=$(grep -ciE '\b(warn|warning|error)\b' "$tmp/logs/exporter.log" || true)
restored=''
# Built apart from the header: under set -e an assignment whose last $(...) fails ends the script.
flags='' callgrind_note=''
if ((full_history)); then flags+=' --full-history'; elif ((storage)); then flags+=' --storage'; fi
if ((callgrind)); then
  flags+=' --callgrind'
  callgrind_note="
- under valgrind's callgrind: the CPU figures below are the exporter's under valgrind (tens of times its own); its instructions per poll are the figure to read"
fi
if ((full_history)); then
  restored=$(grep -o 'saved state applied ([^)]*)' "$tmp/logs/exporter.log" | head -n 1)
  restored="
- history at every bound from the start: $history_note; the exporter's log: ${restored:-the saved state was NOT applied}"
fi

header="# Soak: the exporter's cost over ${minutes} minutes of lock traffic

- date: $started; $(nproc) CPUs, $(free -g | awk '/^Mem:/ {print $2}') GiB, shared with other work (load average $load_before before, $load_after after)
- exporter: $("$bin" --version 2>&1 | head -n 1), 1 s polls (every poll an inventory), the server's jsonlog read$( ((storage)) && echo ", its state kept in a state directory (--storage.path: $(ls "$tmp/state" | paste -sd ' '), $(du -sk "$tmp/state" | cut -f1) KiB at the end)"); PostgreSQL $PG_VERSION (logging_collector, jsonlog, log_disconnections, log_lock_waits)
- phases: ${idle} idle minutes (after a 30 s warm-up), ${minutes} minutes of traffic, ${idle} idle minutes (after the workers ended and 15 s more)
- traffic: two named advisory locks handed over between two sessions every 2.5–4 s; tests/e2e/job_loop.py on a third (a new session every second: unlock, clean close, transaction lock); a fourth lost every 30 s, in turn terminated (taken over 2 s later) and ended by its role's 3 s idle_in_transaction_session_timeout with a session waiting for it (taken over at once); a deadlock of two transaction-level advisory locks every 90 s; a blocking episode every 60 s (a transaction idle on an accounts row for 5 s, two sessions waiting); tests/e2e/lease_cycle.py on two leases (a new holder every 3 s), one lease renewed every 5 s, one left to expire and taken over every 60 s, 20 stable leases; a job queue (docs/row-locks.md's recipe, \`queue = true\`) fed to about 8 queued jobs, two workers claiming one job at a time for 0.3–1.2 s
- scrapes: every 15 s with Accept-Encoding: gzip, and the plain one at each minute's end that the table reads
- the exporter's log: $warnings lines with a warning or an error
- command: \`tests/bench/soak.sh --minutes $minutes --idle $idle$flags\`$restored$callgrind_note"

report=$("$py" "$here/soak.py" report --json "$json" --header "$header")
if [[ -n ${BENCH_OUT:-} ]]; then printf '%s\n' "$report" >"$BENCH_OUT"; fi
printf '%s\n' "$report"
