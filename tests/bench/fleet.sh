#!/usr/bin/env bash
# Fleet benchmark of pglock_exporter: what one exporter costs per target when it polls many real
# PostgreSQL servers, and whether a dead or a hung server delays the polls of the others. Not part
# of the default test run.
#
# Starts BENCH_TARGETS (50) throwaway PostgreSQL servers on this machine (scripts/lib/pg.sh, each
# its own initdb, port and socket), gives the first BENCH_ACTIVE (10) of them a little lock
# activity, then for each poll interval of BENCH_INTERVALS ("1 5"):
#
#   <N>t-<I>s  one exporter with every server as a [[targets]]. First, every target in the config
#              from the start: how many are up, once a second, for up to BENCH_COLD (60) seconds;
#              if not all, the exporter is started again with BENCH_RAMP (5) more targets a
#              second (SIGHUP). Then tests/bench/fleet.py measures it: memory and threads when all
#              are up, a window of BENCH_WINDOW (90) seconds without scrapes for CPU per poll,
#              BENCH_SCRAPES (30) timed scrapes plain and gzip, 30 s of one sample a second, then
#              the last server but one stopped (pg_ctl stop -m immediate) and the last one frozen
#              (SIGSTOP to its postmaster and every child) for BENCH_PAUSE (30) seconds while the
#              others' last successful polls are sampled every second; memory after the run.
#   1t-<I>s    the same exporter with the first server alone (BENCH_BASE_WINDOW (90) seconds of
#              window, no fault): the baseline that the per-target figures subtract.
#
# Prints a Markdown report (and writes it to BENCH_OUT when set). About 12 minutes with the
# defaults. Environment: PGLOCK_EXPORTER_BINARY (default build/pglock_exporter), BENCH_TARGETS,
# BENCH_ACTIVE, BENCH_INTERVALS, BENCH_WINDOW, BENCH_BASE_WINDOW, BENCH_SCRAPES, BENCH_PAUSE,
# BENCH_JOBS (servers set up at once, 4), BENCH_COLD, BENCH_RAMP, BENCH_OUT, BENCH_KEEP=1 (keep
# the temporary directory with every log).
set -euo pipefail
export LC_ALL=C

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd -- "$here/../.." && pwd)
# shellcheck source=scripts/lib/pg.sh
source "$repo/scripts/lib/pg.sh"
bin=${PGLOCK_EXPORTER_BINARY:-$repo/build/pglock_exporter}
n=${BENCH_TARGETS:-50}
active=${BENCH_ACTIVE:-10}
intervals=${BENCH_INTERVALS:-1 5}
window=${BENCH_WINDOW:-90}
base_window=${BENCH_BASE_WINDOW:-90}
scrapes=${BENCH_SCRAPES:-30}
pause=${BENCH_PAUSE:-30}
jobs=${BENCH_JOBS:-4}
cold=${BENCH_COLD:-60}
ramp_step=${BENCH_RAMP:-5}
((n >= 3)) || { echo "BENCH_TARGETS must be at least 3 (one stopped, one frozen)" >&2; exit 2; }
((active < n - 1)) || active=$((n - 2))  # the faulted servers carry no clients
[[ -x $bin ]] || { echo "no exporter at $bin (set PGLOCK_EXPORTER_BINARY)" >&2; exit 2; }

tmp=$(mktemp -d -t fleet-bench.XXXXXX)
chmod 711 "$tmp"  # the postgres user must reach its data directories below
# Every run uses this copy: a rebuild of the tree during the run must not change the binary.
cp "$bin" "$tmp/pglock_exporter"
bin=$tmp/pglock_exporter
mkdir -p "$tmp/logs" "$tmp/pg" "$tmp/out"
exporter_pid='' url='' measured_log=''
client_pids=() client_fds=()

cleanup() {
  set +e
  if [[ -n $exporter_pid ]]; then
    kill "$exporter_pid" 2>/dev/null
    wait "$exporter_pid" 2>/dev/null
  fi
  # A frozen server ignores pg_ctl and every signal but SIGCONT and SIGKILL, and its children
  # would stay frozen after the postmaster's SIGKILL: resume them first.
  if [[ -f $tmp/paused ]]; then
    while read -r p; do kill -CONT "$p" 2>/dev/null; done <"$tmp/paused"
  fi
  for fd in "${client_fds[@]}"; do exec {fd}>&-; done
  for p in "${client_pids[@]}"; do kill "$p" 2>/dev/null; done
  for d in "$tmp"/pg/*; do
    (PG_DATA=$d/pgdata && pg_stop immediate) &
  done
  wait
  if [[ ${BENCH_KEEP:-0} == 1 ]]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

name() { printf 'pg%02d' "$1"; }
dir() { printf '%s/pg/%02d' "$tmp" "$1"; }

# --- the servers ---------------------------------------------------------------------------------
pg_find_bin
# Distinct ports chosen up front: pg_init's own pick, made in parallel subshells, could repeat.
declare -a ports=()
declare -A taken=()
for ((i = 1; i <= n; i++)); do
  p=$(free_port 127.0.0.1)
  while [[ -n ${taken[$p]:-} ]]; do p=$(free_port 127.0.0.1); done
  taken[$p]=1 ports[i]=$p
done

# One server: its own initdb (a copy of one data directory would share its system identifier),
# small settings so that 50 of them fit beside the other work of the machine.
start_server() {
  local i=$1 d
  d=$(dir "$i")
  mkdir -p "$d" "$tmp/logs/$i"
  pg_init "$d" "$tmp/logs/$i"
  PG_PORT=${ports[i]}
  pg_start "shared_buffers = 16MB" "max_connections = 20" "autovacuum = off"
  touch "$d/started"
}

started_at=$SECONDS
for ((i = 1; i <= n; i++)); do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  start_server "$i" >/dev/null 2>&1 &
done
wait || true
for ((i = 1; i <= n; i++)); do
  if [[ ! -f $(dir "$i")/started ]]; then
    echo "server $i did not start:" >&2
    cat "$tmp/logs/$i"/*.log "$(dir "$i")/pgdata/postgres.log" >&2 2>/dev/null || true
    exit 1
  fi
done
setup_seconds=$((SECONDS - started_at))
echo "$n servers up in ${setup_seconds}s" >&2

# --- lock activity -------------------------------------------------------------------------------
# A psql client reading a fifo that this script keeps open: the session stays, idle or waiting,
# until the script exits.
client() {
  local i=$1 sql=$2 fifo fd
  fifo=$tmp/client.${#client_pids[@]}
  mkfifo "$fifo"
  "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "${ports[i]}" -U postgres -d postgres <"$fifo" \
    >>"$tmp/logs/clients.log" 2>&1 &
  client_pids+=($!)
  exec {fd}>"$fifo"
  client_fds+=("$fd")
  printf '%s\n' "$sql" >&"$fd"
}
count() {  # $1 server, $2 a condition on pg_locks
  "$PG_BIN/psql" -X -At -h 127.0.0.1 -p "${ports[$1]}" -U postgres -d postgres \
    -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND $2"
}
wait_locks() {  # $1 server, $2 condition, $3 count
  local k
  for ((k = 0; k < 100; k++)); do
    [[ $(count "$1" "$2") == "$3" ]] && return 0
    sleep 0.1
  done
  echo "server $1: expected $3 advisory locks with $2" >&2
  return 1
}
# Per active server: a session idle with 5 session locks, one idle in transaction with a
# transaction lock, and one waiting behind the first: holders, an idle-in-transaction holder and a
# wait for every poll to read, and nothing that changes from poll to poll.
for ((i = 1; i <= active; i++)); do
  client "$i" "SELECT pg_advisory_lock(k) FROM generate_series(1, 5) k;"
  client "$i" "BEGIN; SELECT pg_advisory_xact_lock(100);"
done
for ((i = 1; i <= active; i++)); do wait_locks "$i" granted 6; done
for ((i = 1; i <= active; i++)); do client "$i" "SELECT pg_advisory_lock(1);"; done
for ((i = 1; i <= active; i++)); do wait_locks "$i" "NOT granted" 1; done

# --- the exporter runs ---------------------------------------------------------------------------
config() {  # $1 interval in seconds, $2 number of targets
  printf '[poll]\ninterval = "%ss"\n' "$1"
  for ((i = 1; i <= $2; i++)); do
    printf '\n[[targets]]\nname = "%s"\n' "$(name "$i")"
    printf 'dsn = "host=127.0.0.1 port=%s user=postgres dbname=postgres"\n' "${ports[i]}"
  done
}
as_postgres_prefix=()
if ((EUID == 0)); then as_postgres_prefix=(runuser -u postgres --); fi
stopped=$((n - 1)) frozen=$n

# Starts the exporter on $tmp/$1.toml, its log in logs/$2.log; sets exporter_pid and url.
start_exporter() {
  local port
  port=$(free_port 127.0.0.1)
  "$bin" --config.file="$tmp/$1.toml" --web.listen-address="127.0.0.1:$port" \
    >"$tmp/logs/$2.log" 2>&1 &
  exporter_pid=$!
  url=http://127.0.0.1:$port/metrics
}
stop_exporter() {
  kill "$exporter_pid"
  wait "$exporter_pid" || true
  exporter_pid=''
}

# Every target configured from the start costs each server a new session at the same moment
# (about 0.1 s of backend CPU each: connect, prepare, first poll). Here the servers share this
# machine's cores, so the first polls may not fit the poll's deadline: the cold start is measured
# on its own (fleet.py cold) and, when not every target came up within $cold seconds, the exporter
# is started again with the targets added $ramp_step at a time, one step a second, by SIGHUP.
ramp() {  # $1 run name, $2 interval, $3 targets
  local k
  config "$2" "$ramp_step" >"$tmp/$1.toml"
  start_exporter "$1" "$1-ramp"
  for ((k = 2 * ramp_step; k < $3 + ramp_step; k += ramp_step)); do
    sleep 1
    config "$2" $((k < $3 ? k : $3)) >"$tmp/$1.next.toml"
    mv "$tmp/$1.next.toml" "$tmp/$1.toml"  # whole, never half written, when SIGHUP reads it
    kill -HUP "$exporter_pid"
  done
}

# $1 run name, $2 interval, $3 targets, $4 window; with $5 = fault, the stop and the freeze.
run() {
  local run_name=$1 iv=$2 count=$3 win=$4 extra=() started='all at once' state
  if [[ ${5:-} == fault ]]; then
    extra=(--stop-target "$(name "$stopped")" --pause-target "$(name "$frozen")"
      --stop-cmd "cd $(dir "$stopped") && $(printf '%q ' "${as_postgres_prefix[@]}" \
        "$PG_BIN/pg_ctl" -D "$(dir "$stopped")/pgdata" -m immediate -w stop) >/dev/null"
      --pause-pidfile "$(dir "$frozen")/pgdata/postmaster.pid" --paused-list "$tmp/paused"
      --fault-seconds "$pause")
  fi
  config "$iv" "$count" >"$tmp/$run_name.toml"
  start_exporter "$run_name" "$run_name"
  measured_log=$run_name
  if ((count > 1)); then
    state=$(python3 "$here/fleet.py" cold --url "$url" --pid "$exporter_pid" --name "$run_name" \
      --targets "$count" --interval "$iv" --seconds "$cold" --out "$tmp/out/$run_name-cold.json")
    colds+=("$tmp/out/$run_name-cold.json")
    echo "$run_name: every target at once: $state" >&2
    if [[ $state != all-up ]]; then
      stop_exporter
      ramp "$run_name" "$iv" "$count"
      measured_log=$run_name-ramp
      started="$ramp_step a second (SIGHUP)"
    fi
  fi
  if ((count == 1)); then
    extra+=(--backend-cmd "$(printf '%q ' "$PG_BIN/psql") -X -At -h 127.0.0.1 -p ${ports[1]} \
      -U postgres -d postgres -c \"SELECT pid FROM pg_stat_activity \
      WHERE application_name = 'pglock_exporter'\"")
  fi
  python3 "$here/fleet.py" measure --url "$url" --pid "$exporter_pid" --name "$run_name" \
    --targets "$count" --interval "$iv" --window "$win" --scrapes "$scrapes" --started "$started" \
    --out "$tmp/out/$run_name.json" "${extra[@]}" >&2
  stop_exporter
  rm -f "$tmp/paused"
}

# A healthy target's failure in the log would mean the fault reached it.
log_check() {  # $1 log name
  local faulted others
  faulted="target ($(name "$stopped")|$(name "$frozen")):"
  others=$(grep -E 'target pg[0-9]+: poll failed' "$tmp/logs/$1.log" | grep -cvE "$faulted" || true)
  printf -- '- %s.log: lines of a failed poll of a target other than %s and %s: %s; of those two: %s\n' \
    "$1" "$(name "$stopped")" "$(name "$frozen")" "$others" \
    "$(grep -cE "$faulted poll failed" "$tmp/logs/$1.log" || true)"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
runs=() colds=() checks=''
for iv in $intervals; do
  run "${n}t-${iv}s" "$iv" "$n" "$window" fault
  runs+=("$tmp/out/${n}t-${iv}s.json")
  checks+=$(log_check "$measured_log")$'\n'
  # The stopped server comes back for the next run, on its port and socket (pg.sh's settings).
  (cd "$(dir "$stopped")" && as_postgres "$PG_BIN/pg_ctl" -D "$(dir "$stopped")/pgdata" \
    -l "$(dir "$stopped")/pgdata/postgres.log" -w -t 60 start >/dev/null)
  run "1t-${iv}s" "$iv" 1 "$base_window"
  runs+=("$tmp/out/1t-${iv}s.json")
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

header="# Fleet benchmark: one exporter, $n PostgreSQL servers

- date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs, $(free -g | awk '/^Mem:/ {print $2}') GiB, shared with other work (load average $load_before before, $load_after after)
- exporter: $("$bin" --version 2>&1 | head -n 1); PostgreSQL $PG_VERSION, $n servers on this machine (shared_buffers 16MB, max_connections 20, fsync off), set up in ${setup_seconds}s, $jobs at a time
- lock activity on $active servers: one session idle with 5 session advisory locks, one idle in transaction with a transaction lock, one waiting behind the first
- $n-target runs: every target in the config from the start, up counted once a second for up to ${cold}s; if not all came up, the exporter started again with $ramp_step more targets a second (SIGHUP); then a quiet window ${window}s, $scrapes scrapes plain then $scrapes gzip, 30 s of sampling, then $(name "$stopped") stopped (immediate) and $(name "$frozen") frozen (SIGSTOP, postmaster and children) for ${pause}s; 1-target runs ($(name 1) alone): window ${base_window}s, no fault
- memory: VmRSS and VmHWM of /proc/PID/status; CPU: utime+stime of /proc/PID/stat (all threads) over the window without scrapes, divided by the polls in it; polls counted per target as the advance of pglock_last_poll_success_timestamp_seconds read before and after the window, in whole intervals (the exporter starts a poll one interval after the previous one started), checked against the window ÷ interval × targets
- scrape time: curl -w '%{time_total}', sequential, one exporter-side rendering per new set of snapshots
- command: \`tests/bench/fleet.sh\`"

report=$(python3 "$here/fleet.py" report --json "${runs[@]}" --cold "${colds[@]}" --header "$header")
report+=$'\n\n## The exporter\'s log\n\n'"$checks"
report+=$'\n'"Wall time of the script: ${SECONDS} s (servers set up in ${setup_seconds} s)."
if [[ -n ${BENCH_OUT:-} ]]; then printf '%s\n' "$report" >"$BENCH_OUT"; fi
printf '%s\n' "$report"
