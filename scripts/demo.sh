#!/usr/bin/env bash
# pglock_exporter demo: a throwaway PostgreSQL with a workload that reproduces the three incidents
# the exporter was built for (scripts/demo/README.md), the exporter, Prometheus with the alert rules
# and Alertmanager. Everything runs from one temporary directory on free ports, as the current user
# (PostgreSQL and PgBouncer as `postgres` when run as root), and is stopped and removed on exit.
#
# Usage: scripts/demo.sh [--no-install] [--help]
# Environment:
#   BUILD_DIR                 build directory (default: build, as in the README)
#   PGLOCK_DEMO_PORT          exporter port (default 9716; must be free)
#   PGLOCK_DEMO_BIND          address the exporter, Prometheus and Alertmanager listen on
#                             (default 127.0.0.1; 0.0.0.0 to browse from another machine)
#   PGLOCK_DEMO_DURATION      stop by itself after this many seconds (default: run until Ctrl-C)
#   PGLOCK_DEMO_FAST_ALERTS=1 load the rules with every `for:` cut to 2s (alerts/shorten_for.sh)
#   PGLOCK_DEMO_PGBOUNCER=0   leave out PgBouncer (the transaction-pooler leak)
#   PGLOCK_DEMO_KEEP=1        keep the temporary directory (logs, data) after stopping
#   PGLOCK_PG_BINDIR          PostgreSQL server binaries (default: the newest /usr/lib/postgresql/*/bin)
set -euo pipefail

repo=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
demo_dir=$repo/scripts/demo
# shellcheck source=scripts/lib/pg.sh
source "$repo/scripts/lib/pg.sh"
# shellcheck source=scripts/lib/pgbouncer.sh
source "$repo/scripts/lib/pgbouncer.sh"

install=1
for arg in "$@"; do
  case $arg in
    --no-install) install=0 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "usage: $0 [--no-install] [--help]" >&2
      exit 2
      ;;
  esac
done

build_dir=${BUILD_DIR:-$repo/build}
exporter_port=${PGLOCK_DEMO_PORT:-9716}
bind=${PGLOCK_DEMO_BIND:-127.0.0.1}
duration=${PGLOCK_DEMO_DURATION:-}
fast_alerts=${PGLOCK_DEMO_FAST_ALERTS:-0}
want_pgbouncer=${PGLOCK_DEMO_PGBOUNCER:-1}
keep_tmp=${PGLOCK_DEMO_KEEP:-0}
if [[ -n $duration && ! $duration =~ ^[0-9]+$ ]]; then
  echo "demo: PGLOCK_DEMO_DURATION must be a number of seconds" >&2
  exit 2
fi
if [[ ! $exporter_port =~ ^[0-9]+$ ]]; then
  echo "demo: PGLOCK_DEMO_PORT must be a port number" >&2
  exit 2
fi

say() { printf 'demo: %s\n' "$*"; }
die() {
  printf 'demo: error: %s\n' "$*" >&2
  exit 1
}

# --- 1. dependencies and build -----------------------------------------------------------------------
if ((install)); then
  "$repo/scripts/install-deps.sh" demo
fi
say "building pglock_exporter in $build_dir (a few minutes the first time)"
cmake -S "$repo" -B "$build_dir" >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target pglock_exporter >/dev/null
exporter=$build_dir/pglock_exporter
[[ -x $exporter ]] || die "no binary at $exporter after the build"

pgbouncer_bin=$(PATH=$PATH:/usr/sbin:/sbin command -v pgbouncer || true)
pg_find_bin || exit 1
for tool in prometheus prometheus-alertmanager promtool python3 curl; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/install-deps.sh demo)"
done
if [[ $want_pgbouncer == 1 && -z $pgbouncer_bin ]]; then
  say "pgbouncer not found: leaving out the transaction-pooler part"
  want_pgbouncer=0
fi

# The one fixed port: check it before starting anything.
[[ $(free_port "$bind" "$exporter_port") == "$exporter_port" ]] ||
  die "port $exporter_port is in use: set PGLOCK_DEMO_PORT to a free port"

# --- process bookkeeping and cleanup -----------------------------------------------------------------
tmp=
declare -A pids=()
stop_order=(workload prometheus alertmanager exporter)

# Starts "$@" in the background, in a process group of its own (so the group can be stopped as a
# whole and a Ctrl-C in the terminal reaches only this script). Output to LOG, or the terminal for -.
start_bg() {
  local name=$1 log=$2
  shift 2
  set -m
  if [[ $log == - ]]; then
    "$@" &
  else
    "$@" >"$log" 2>&1 &
  fi
  pids[$name]=$!
  set +m
}

# True while PID runs (an exited child stays a zombie until waited for: that counts as gone).
is_running() {
  local stat
  stat=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ $stat != Z* ]]
}

stop_group() {
  local name=$1 pid=${pids[$1]:-} i
  [[ -n $pid ]] || return 0
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    is_running "$pid" || break
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "pids[$name]"
}

show_logs() {
  local f
  for f in "$tmp"/logs/*.log; do
    [[ -s $f ]] || continue
    printf '\n---- %s (last lines) ----\n' "${f##*/}" >&2
    tail -n 15 "$f" >&2
  done
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  [[ -n $tmp && -d $tmp ]] || exit "$rc"
  if ((rc != 0 && rc != 130 && rc != 143)); then show_logs; fi
  say "stopping"
  local name
  for name in "${stop_order[@]}"; do stop_group "$name"; done
  pgb_stop
  pg_stop fast
  if [[ $keep_tmp == 1 ]]; then
    say "stopped everything; kept $tmp (PGLOCK_DEMO_KEEP=1)"
  else
    rm -rf -- "$tmp"
    say "stopped everything and removed $tmp"
  fi
  exit "$rc"
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pglock-demo.XXXXXX")
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$tmp/logs" "$tmp/prometheus/data" "$tmp/alertmanager/data" "$tmp/pgbouncer"
if ((EUID == 0)); then
  # Only root and postgres can enter the directory; PostgreSQL and PgBouncer write inside it.
  chown postgres: "$tmp" "$tmp/logs" "$tmp/pgbouncer"
fi
chmod 700 "$tmp"

# --- 2. PostgreSQL -----------------------------------------------------------------------------------
password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
# One password for every demo role; clients find it here (libpq ignores a pgpass others can read).
printf '127.0.0.1:*:*:*:%s\n' "$password" >"$tmp/pgpass"
chmod 600 "$tmp/pgpass"

pg_init "$tmp" "$tmp/logs" --auth-local=trust --auth-host=scram-sha-256 ||
  die "initdb failed (initdb.log below)"
pg_port=$PG_PORT
# The server's structured log, which the exporter reads for exact session ends (README, "The
# server's log"): jsonlog from 15 on, csvlog before, in pgdata/log beside the plain text log. The
# exporter runs as the server's user, or as root: it may read the data directory.
log_format=csvlog
((${PG_VERSION%%.*} >= 15)) && log_format=jsonlog
say "starting PostgreSQL $PG_VERSION on 127.0.0.1:$pg_port (data in $tmp/pgdata, $log_format log)"
pg_start "shared_buffers = 32MB" "log_line_prefix = '%m [%p] %q%u@%d/%a '" \
  "logging_collector = on" "log_directory = 'log'" "log_destination = 'stderr,$log_format'" \
  "log_disconnections = on" "log_lock_waits = on" ||
  die "PostgreSQL did not start"

PGLOCK_DEMO_PASSWORD=$password pg_psql -d postgres -f "$demo_dir/setup.sql" \
  >"$tmp/logs/setup.log" 2>&1 || die "setting up the demo database failed"
# The "pool of four" locks are pg_try_advisory_lock(hashtext(job)): name them by their bigint key.
read -r key_sweep key_alerts key_mail key_uptime < <(pg_psql -d app -At -F ' ' -c \
  "SELECT hashtext('sweep'), hashtext('alerts'), hashtext('mail-checks'), hashtext('uptime:node-a')") ||
  die "cannot compute the lock keys"

# --- PgBouncer in transaction pooling mode (session locks leak to the pool's next client) -----------
pgbouncer_port=
if [[ $want_pgbouncer == 1 ]]; then
  say "starting PgBouncer (pool_mode=transaction, one server connection per pool)"
  pgb_start "$tmp/pgbouncer" "$tmp/logs/pgbouncer.log" "$pg_port" app 1 \
    "$(printf '"billing" "%s"\n"pglock_exporter" "%s"' "$password" "$password")" pglock_exporter ||
    die "PgBouncer did not start"
  pgbouncer_port=$PGB_PORT
  say "PgBouncer on 127.0.0.1:$pgbouncer_port"
fi

# --- 3. the exporter ---------------------------------------------------------------------------------
config=$tmp/pglock_exporter.toml
dsn_common="host=127.0.0.1 user=pglock_exporter passfile=$tmp/pgpass"
# The packaged example config, with billing-worker's four jobs (the pool of four), locked with
# pg_try_advisory_lock(hashtext(job)), among the lock names.
poolers=()
[[ -n $pgbouncer_port ]] && poolers=(--pooler "pgbouncer=$dsn_common port=$pgbouncer_port dbname=pgbouncer")
python3 "$repo/scripts/lib/example_config.py" \
  --comment "pglock_exporter demo configuration (written by scripts/demo.sh)" \
  --name demo --dsn "$dsn_common port=$pg_port dbname=app" --poll interval=2s --named-locks \
  --lock "name=sweep,key=$key_sweep" --lock "name=alerts,key=$key_alerts" \
  --lock "name=mail-checks,key=$key_mail" --lock "name=uptime:node-a,key=$key_uptime" \
  --lease public.leases:holder_parts "${poolers[@]}" \
  --server-log "path=$PG_DATA/log,format=$log_format" >"$config"
"$exporter" --config.file="$config" --check-config >/dev/null || die "the demo config is invalid"

exporter_url=http://127.0.0.1:$exporter_port
say "starting pglock_exporter on $bind:$exporter_port"
start_bg exporter "$tmp/logs/exporter.log" \
  "$exporter" --config.file="$config" --web.listen-address="$bind:$exporter_port" --log.level=info
up=0
for ((i = 0; i < 150; i++)); do
  is_running "${pids[exporter]}" || die "pglock_exporter exited"
  # grep without -q reads all of curl's output: with -q it may stop first and fail curl (pipefail).
  if curl -fsS "$exporter_url/metrics" 2>/dev/null | grep '^pglock_up{target="demo"} 1' >/dev/null; then
    up=1
    break
  fi
  sleep 0.2
done
((up)) || die "pglock_exporter does not report pglock_up{target=\"demo\"} 1 after 30s"

# --- 4. Alertmanager and Prometheus ------------------------------------------------------------------
am_port=$(free_port "$bind" 9093)
cat >"$tmp/alertmanager/alertmanager.yml" <<EOF
# Nothing is sent anywhere: look at the alerts in the web UI.
route:
  receiver: "null"
  group_by: [alertname, target]
  group_wait: 10s
  group_interval: 30s
  repeat_interval: 4h
receivers:
  - name: "null"
EOF
say "starting Alertmanager on $bind:$am_port"
# --cluster.listen-address= turns off gossip clustering (it would bind port 9094).
start_bg alertmanager "$tmp/logs/alertmanager.log" \
  prometheus-alertmanager --config.file="$tmp/alertmanager/alertmanager.yml" \
  --storage.path="$tmp/alertmanager/data" --web.listen-address="$bind:$am_port" \
  --cluster.listen-address=

rules_src=$repo/alerts/pglock.rules.yml
rules=
if [[ -f $rules_src ]]; then
  if [[ $fast_alerts == 1 && -x $repo/alerts/shorten_for.sh ]]; then
    "$repo/alerts/shorten_for.sh" "$rules_src" "$tmp/prometheus/pglock.rules.yml" 2>/dev/null &&
      rules=$tmp/prometheus/pglock.rules.yml
  elif promtool check rules "$rules_src" >"$tmp/logs/promtool.log" 2>&1; then
    rules=$rules_src
  fi
  [[ -n $rules ]] || say "warning: $rules_src does not pass promtool check rules; running without alerts"
else
  say "warning: $rules_src not found; Prometheus runs without alert rules"
fi

prom_port=$(free_port "$bind" 9090)
{
  cat <<EOF
global:
  scrape_interval: 5s
  evaluation_interval: 5s
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:$am_port"]
scrape_configs:
  - job_name: pglock
    static_configs:
      - targets: ["127.0.0.1:$exporter_port"]
EOF
  if [[ -n $rules ]]; then printf 'rule_files:\n  - "%s"\n' "$rules"; fi
} >"$tmp/prometheus/prometheus.yml"
promtool check config "$tmp/prometheus/prometheus.yml" >>"$tmp/logs/promtool.log" 2>&1 ||
  die "the generated Prometheus config is invalid"
say "starting Prometheus on $bind:$prom_port"
start_bg prometheus "$tmp/logs/prometheus.log" \
  prometheus --config.file="$tmp/prometheus/prometheus.yml" \
  --storage.tsdb.path="$tmp/prometheus/data" --storage.tsdb.retention.time=1d \
  --web.listen-address="$bind:$prom_port"

prom_url=http://127.0.0.1:$prom_port
am_url=http://127.0.0.1:$am_port
for svc in prometheus alertmanager; do
  url=$prom_url
  [[ $svc == alertmanager ]] && url=$am_url
  for ((i = 0; i < 300; i++)); do
    is_running "${pids[$svc]}" || die "$svc exited"
    curl -fsS "$url/-/ready" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fsS "$url/-/ready" >/dev/null 2>&1 || die "$svc is not ready after 30s"
done

# --- 5. what to look at ------------------------------------------------------------------------------
host_hint=127.0.0.1
if [[ $bind != 127.0.0.1 ]]; then host_hint=$(hostname -f 2>/dev/null || hostname); fi
cat <<EOF

================================================================================================
 pglock_exporter demo is running (temporary directory $tmp)

 exporter      http://$host_hint:$exporter_port/          metrics: http://$host_hint:$exporter_port/metrics
 Prometheus    http://$host_hint:$prom_port/alerts      rules:   http://$host_hint:$prom_port/rules
 Alertmanager  http://$host_hint:$am_port/
 PostgreSQL    psql "host=127.0.0.1 port=$pg_port dbname=app user=pglock_exporter passfile=$tmp/pgpass"

 What to watch (times from now; the workload below narrates each step as it happens):
  ~0:25  PglockLockAboutToBeDropped fires: rebuild run #1 (role app_worker) is idle in transaction
         holding lock rebuild:run, <60s before its 45s idle_in_transaction_session_timeout.
         See pglock_idle_in_transaction_timeout_remaining_seconds count down.      [timeout drop]
  ~0:50  the timeout ends the session: PglockAdvisoryLockLost (cause idle_in_transaction_timeout,
         read from the server's $log_format log: the event on /locks says "evidence log"),
         PglockAdvisoryLockTakeover (run #2 took rebuild:run). Both fire at once (no for:).
         The cycle repeats every 2 minutes.                                        [timeout drop]
  ~1:25  PglockLockHoldersExhaustClientPool: billing-worker's 4 connections served requests,
         then all sit idle holding session advisory locks (the last from ~0:20, firing
         after 1m).                                                                [pool of four]
  ~1:05  PglockBlockingRootIdleInTransaction and PglockLockQueue: checkout sits idle in
         transaction on a row of orders; migrate's ALTER TABLE waits behind it and 4 storefront
         readers wait behind the ALTER (5 sessions blocked, queue depth 2).       [the pile-up]
  ~1:05  PglockSessionLockThroughTransactionPooler: a session lock left on a PgBouncer server
         connection (pool_mode=transaction).                                       [pooler leak]
  ~1:20  PglockLeaseExpiredTakeover: lease mail-checks expired and host-b took it over. [leases]
  ~1:35  PglockLockWaitLong: one per pile-up edge (ALTER -> checkout, readers -> ALTER).
  ~1:35  PglockAdvisoryLockWaitLong: 2 sessions wait for report-daily, 1 for the shared
         nightly-export key (pending after 30s of waiting, firing 1m later; one alert per
         waiter->blocker edge, a waiter queued ahead counts as a blocker).        [lock waiters]
  ~1:40  PglockLeaseOverlap: lease alerts hand-edited to another holder while valid.    [leases]
  ~3:05  PglockIdleInTransactionLockHolder: an export-reader left a transaction open while
         holding a shared advisory lock that blocks export-writer.
  ~5:05  PglockLeaseHeldTooLong: lease nightly-report was taken 70 minutes ago.
  ~5:30  PglockLeaseExpired: lease uptime:node-b expired and nobody took it over.
  ~6:05  PglockAdvisoryLockWaitCritical: the report-daily waiters pass 5 minutes.
  ~6:05  PglockLockWaitCritical: the pile-up's waits pass 5 minutes.
 Not shown: PglockTargetDown (the database stays up), PglockServerLogUnreadable (its log stays
 readable: see pglock_server_log_up and pglock_server_log_records_total).
EOF
if [[ -z $rules ]]; then
  echo " (No alert rules loaded: only the metrics are there to see.)"
elif [[ $fast_alerts == 1 ]]; then
  echo " (PGLOCK_DEMO_FAST_ALERTS=1: every for: is 2s, so alerts fire as soon as their condition holds.)"
fi
if [[ -n $duration ]]; then
  echo " Stops by itself after ${duration}s (PGLOCK_DEMO_DURATION)."
else
  echo " Press Ctrl-C to stop and remove everything."
fi
echo "================================================================================================"
echo

# --- 6. the workload ---------------------------------------------------------------------------------
# Started last, once the exporter is polling, so that it sees every holder before its lock goes.
say "starting the workload (psql output in $tmp/logs)"
start_bg workload - env PATH="$PG_BIN:$PATH" PGHOST=127.0.0.1 PGPORT="$pg_port" PGDATABASE=app \
  PGPASSFILE="$tmp/pgpass" DEMO_LOG_DIR="$tmp/logs" DEMO_PGBOUNCER_PORT="$pgbouncer_port" \
  "$demo_dir/workload.sh"

# --- 7. wait: one line of alert states every 30 s -------------------------------------------------
alert_status() {
  curl -fsS "$prom_url/api/v1/alerts" 2>/dev/null | python3 "$demo_dir/alert_status.py" 2>/dev/null ||
    echo "(Prometheus did not answer)"
}

started=$SECONDS
next_status=$((SECONDS + 30))
while :; do
  for name in exporter prometheus alertmanager workload; do
    is_running "${pids[$name]}" || die "$name exited unexpectedly"
  done
  elapsed=$((SECONDS - started))
  if [[ -n $duration ]] && ((elapsed >= duration)); then
    say "t=${elapsed}s alerts: $(alert_status)"
    say "PGLOCK_DEMO_DURATION=${duration}s reached"
    exit 0
  fi
  if ((SECONDS >= next_status)); then
    say "t=${elapsed}s alerts: $(alert_status)"
    next_status=$((next_status + 30))
  fi
  # In the background, so that Ctrl-C runs the trap at once.
  sleep 1 &
  wait $! || true
done
