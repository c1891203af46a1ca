#!/usr/bin/env bash
# Live end-to-end alerting test: a real PostgreSQL, pglock_exporter, Prometheus with the shipped
# alert rules (every `for:` cut to 2s by alerts/shorten_for.sh, thresholds untouched), Alertmanager,
# and a webhook receiver (tests/e2e/webhook.py) that logs every notification. It checks that:
#
#   0. with no workload, nothing fires and the webhook receives nothing (about 20 s);
#   1. the incidents the alerts are for, driven with psql, reach the webhook as the right alert with
#      the right labels (scenarios run in parallel):
#        a. an advisory wait over 30 s                     -> PglockAdvisoryLockWaitLong
#        b. a lock holder idle in transaction under a per-role 8 s
#           idle_in_transaction_session_timeout            -> PglockLockAboutToBeDropped (before the
#           drop), then PglockAdvisoryLockLost (cause idle_in_transaction_timeout),
#           PglockAdvisoryLockTakeover
#        c. a pool of four serves requests, then its four connections end up idle holding
#           session locks                                  -> PglockLockHoldersExhaustClientPool
#        d. the leases table: a lease left to expire, then taken over -> PglockLeaseExpired,
#           PglockLeaseExpiredTakeover
#        e. the leases table's own cycle for two minutes (take, 1.5 s of work, DELETE, the next
#           round taking at once: hand-overs)   -> no lease alert, no overlap counted
#        f. at the same time, a job loop (tests/e2e/job_loop.py) that takes, uses and releases lock
#           job-loop every second in the ordinary ways (unlock then close, close holding, two
#           workers contending, a migration inside BEGIN, a transaction lock)
#                                               -> no loss, no takeover, no alert
#        h. (last) the exporter killed while a lock is held, the holder terminated and the key taken
#           while it is down, the exporter started again with its state
#                                               -> PglockAdvisoryLockLost, PglockAdvisoryLockTakeover
#        g. at the same time, two job loops of transaction locks (pg_advisory_xact_lock) on one
#           hot key through a PgBouncer in transaction mode with two server connections, the fix
#           that pooler guides give for session locks         -> no pooled session lock counted,
#           no inheritance, no pooled alert, not even pending
#        i. at the same time, a session lock leaked through a second PgBouncer (transaction mode,
#           one server connection) while other clients keep that connection busy about half the
#           time                          -> PglockSessionLockThroughTransactionPooler with its real
#           `for: 1m` (the one rule not shortened), within 90 s of the leak: traffic through the pool
#           never restarts its minute; resolved once the lock is unlocked through the pool
#      and that alerts resolve (Alertmanager sends status "resolved") when their condition ends;
#   2. every dashboard expression (dashboards/exprs.sh) is accepted by Prometheus, and most return
#      data while the scenarios are active.
# Prints a timing summary. Everything runs in a temporary directory on free ports and is stopped and
# removed on exit, failure included.
#
# Environment:
#   PGLOCK_EXPORTER_BINARY   exporter to test (default: <repo>/build/pglock_exporter)
#   PGLOCK_E2E_KEEP=1        keep the temporary directory (logs, configs, webhook log) on exit
#   PGLOCK_E2E_BASELINE=20   seconds of quiet baseline
#   PGLOCK_PG_BINDIR         PostgreSQL server binaries (default: the newest /usr/lib/postgresql/*/bin)
#   PGLOCK_E2E_LEASE_CYCLE=120  seconds of scenario e's lease cycle and f's job loop
# Needs (Debian packages): postgresql-15, prometheus (prometheus, promtool), prometheus-alertmanager,
# python3, curl. Runs PostgreSQL as `postgres` when started as root (scripts/lib/pg.sh).
set -euo pipefail
export LC_ALL=C

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd -- "$here/../.." && pwd)
exporter=${PGLOCK_EXPORTER_BINARY:-$repo/build/pglock_exporter}
baseline_seconds=${PGLOCK_E2E_BASELINE:-20}
# shellcheck source=scripts/lib/pg.sh
source "$repo/scripts/lib/pg.sh"
# shellcheck source=scripts/lib/bg.sh
source "$repo/scripts/lib/bg.sh"
# shellcheck source=scripts/lib/pgbouncer.sh
source "$repo/scripts/lib/pgbouncer.sh"
py=/usr/bin/python3
[[ -x $py ]] || py=$(command -v python3 || echo python3)

E2E_NAME=e2e # say's prefix (tests/e2e/lib/live.sh)
# shellcheck source=tests/e2e/lib/live.sh
source "$here/lib/live.sh"
now() { printf '%s\n' "$EPOCHREALTIME"; }

# --- prerequisites -------------------------------------------------------------------------------------
[[ -x $exporter ]] || fail "no exporter binary at $exporter (build it with scripts/build.sh, or set PGLOCK_EXPORTER_BINARY)"
pg_find_bin || exit 1
for tool in prometheus promtool prometheus-alertmanager curl; do
  command -v "$tool" >/dev/null || fail "$tool not found (Debian packages prometheus, prometheus-alertmanager, curl)"
done
for f in "$repo/alerts/pglock.rules.yml" "$repo/alerts/shorten_for.sh" "$repo/dashboards/exprs.sh" \
  "$here/webhook.py" "$here/alertlog.py" "$here/promapi.py" "$here/lease_cycle.py" \
  "$here/job_loop.py"; do
  [[ -r $f ]] || fail "missing $f"
done

# --- process bookkeeping and cleanup -------------------------------------------------------------------
# Background processes: start_bg / stop_pid / stop_named (scripts/lib/bg.sh).
tmp=
i_pgb_dir= # scenario i's PgBouncer (g's is scripts/lib/pgbouncer.sh's PGB_DIR)

# Fails when the named service has exited (a port taken since free_port chose it, a bad flag, ...).
alive() {
  local pid
  for pid in "${bg_pids[@]}"; do
    if [[ ${bg_name[$pid]:-} == "$1" ]] && ! kill -0 "$pid" 2>/dev/null; then
      fail "$1 exited unexpectedly" "$(tail -n 20 "$logs/$1.log" 2>/dev/null)"
    fi
  done
}

show_logs() {
  local f
  for f in "$tmp"/logs/*.log; do
    [[ -s $f ]] || continue
    printf '\n---- %s (last lines) ----\n' "${f#"$tmp"/}" >&2
    tail -n 12 "$f" >&2
  done
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  [[ -n $tmp && -d $tmp ]] || exit "$rc"
  if ((rc != 0 && rc != 130 && rc != 143)) && [[ -d $tmp/logs ]]; then show_logs; fi
  # Prometheus and Alertmanager first (no notification about the teardown), then the clients, the
  # webhook and the exporter (reverse start order), then PostgreSQL.
  stop_named prometheus
  stop_named alertmanager
  local i
  for ((i = ${#bg_pids[@]} - 1; i >= 0; i--)); do stop_pid "${bg_pids[i]}"; done
  pgb_stop
  PGB_DIR=$i_pgb_dir pgb_stop
  pg_stop immediate
  if [[ ${PGLOCK_E2E_KEEP:-0} == 1 ]]; then
    echo "e2e: kept $tmp" >&2
  else
    rm -rf -- "$tmp"
  fi
  if ((rc == 0)); then say "cleaned up"; else echo "e2e: FAILED (exit $rc), cleaned up" >&2; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pglock-e2e.XXXXXX")
mkdir -p "$tmp/logs" "$tmp/prometheus/data" "$tmp/alertmanager/data" "$tmp/dash"
chmod 700 "$tmp"
logs=$tmp/logs
hooks=$tmp/webhook.jsonl
: >"$hooks"

# --- 1. PostgreSQL -------------------------------------------------------------------------------------
pg_init "$tmp" "$logs" --auth-local=trust --auth-host=scram-sha-256 ||
  fail "initdb failed" "$(tail -n 20 "$logs/initdb.log")"
pg_port=$PG_PORT
password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
printf '127.0.0.1:%s:*:*:%s\n' "$pg_port" "$password" >"$tmp/pgpass"
chmod 600 "$tmp/pgpass"
say "PostgreSQL $PG_VERSION on 127.0.0.1:$pg_port (in $tmp)"
pg_start "shared_buffers = 32MB" "log_line_prefix = '%m [%p] %q%u@%d/%a '" ||
  fail "PostgreSQL did not start" "$(tail -n 20 "$logs/postgres.log" 2>/dev/null)"

export PGHOST=127.0.0.1 PGPORT=$pg_port PGDATABASE=postgres PGPASSFILE=$tmp/pgpass PGCONNECT_TIMEOUT=5
export PSQL=$PG_BIN/psql
psql_admin() { pg_psql -d postgres "$@"; }
sql() { psql_admin -A -t -c "$1"; } # one statement as superuser; prints unaligned tuples

psql_admin -v pw="$password" >"$logs/setup.log" 2>&1 <<'SQL' || fail "database setup failed" "$(cat "$logs/setup.log")"
-- One role per scenario, so usename labels tell them apart.
CREATE ROLE pglock_exporter LOGIN PASSWORD :'pw';
GRANT pg_monitor TO pglock_exporter;
CREATE ROLE reporting LOGIN PASSWORD :'pw';   -- a. advisory wait
CREATE ROLE app_worker LOGIN PASSWORD :'pw';  -- b. lock dropped by idle_in_transaction_session_timeout
CREATE ROLE billing LOGIN PASSWORD :'pw';     -- c. pool of four
CREATE ROLE scheduler LOGIN PASSWORD :'pw';   -- d. leases
CREATE ROLE jobs LOGIN PASSWORD :'pw';        -- f. the job loop, and the schema its migrations change
CREATE TABLE job_loop_schema (version int);
ALTER TABLE job_loop_schema OWNER TO jobs;
-- b. a per-role, per-database timeout that no application config mentions.
ALTER ROLE app_worker IN DATABASE postgres SET idle_in_transaction_session_timeout = '8s';
-- The leases table: a lease is a row (name, holder, taken_at, expires_at).
CREATE TABLE leases (
  name       text PRIMARY KEY,
  holder     text NOT NULL,
  taken_at   timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
GRANT SELECT, INSERT, UPDATE, DELETE ON leases TO scheduler;
GRANT SELECT ON leases TO pglock_exporter;
-- When things happened, by the database's clock (the test's own bookkeeping).
CREATE TABLE e2e_events (name text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
GRANT INSERT ON e2e_events TO app_worker;
SQL

# g's PgBouncer: transaction pooling, two server connections per pool.
pgb_start "$tmp/pgbouncer" "$logs/pgbouncer.log" "$pg_port" postgres 2 \
  "$(printf '"jobs" "%s"\n"pglock_exporter" "%s"' "$password" "$password")" pglock_exporter ||
  fail "PgBouncer did not start"
printf '127.0.0.1:%s:*:*:%s\n' "$PGB_PORT" "$password" >>"$tmp/pgpass"
say "PgBouncer (transaction pooling) on 127.0.0.1:$PGB_PORT"
# i's PgBouncer: transaction pooling, one server connection, so every client gets the leaked one.
g_pgb_dir=$PGB_DIR g_pgb_port=$PGB_PORT
pgb_start "$tmp/pgbouncer-leak" "$logs/pgbouncer-leak.log" "$pg_port" postgres 1 \
  "$(printf '"jobs" "%s"\n"pglock_exporter" "%s"' "$password" "$password")" pglock_exporter ||
  fail "scenario i's PgBouncer did not start"
i_pgb_dir=$PGB_DIR i_pgb_port=$PGB_PORT
PGB_DIR=$g_pgb_dir PGB_PORT=$g_pgb_port
printf '127.0.0.1:%s:*:*:%s\n' "$i_pgb_port" "$password" >>"$tmp/pgpass"
say "PgBouncer (transaction pooling, one server connection) on 127.0.0.1:$i_pgb_port"

# --- 2. the exporter -----------------------------------------------------------------------------------
exporter_port=$(free_port)
config=$tmp/pglock_exporter.toml
# The packaged example config with the locks each scenario names: a. the long-held lock, b. the
# rebuild job's lock, f. the job loop, g. the transaction locks through PgBouncer.
"$py" "$repo/scripts/lib/example_config.py" --comment "written by tests/e2e/alerts_live.sh" \
  --name e2e --dsn "host=127.0.0.1 port=$pg_port dbname=postgres user=pglock_exporter passfile=$tmp/pgpass" \
  --poll interval=1s --named-locks --lock name=job-loop,key_text=job-loop \
  --lock name=restart-demo,key_text=restart-demo \
  --lock name=pooled-xact,key_text=pooled-xact --lease public.leases:holder_parts \
  --pooler "pgbouncer=host=127.0.0.1 port=$PGB_PORT dbname=pgbouncer user=pglock_exporter passfile=$tmp/pgpass" \
  --pooler "leakpool=host=127.0.0.1 port=$i_pgb_port dbname=pgbouncer user=pglock_exporter passfile=$tmp/pgpass" \
  >"$config"
"$exporter" --config.file="$config" --check-config >"$logs/check-config.log" 2>&1 ||
  fail "the exporter rejects the test config" "$(cat "$logs/check-config.log")"
say "pglock_exporter ($exporter) on 127.0.0.1:$exporter_port"
state_dir=$tmp/state
mkdir -p "$state_dir"
exporter_args=(--config.file="$config" --web.listen-address="127.0.0.1:$exporter_port"
  --poll.interval=1s --log.level=info --storage.path="$state_dir")
start_bg exporter "$logs/exporter.log" "$exporter" "${exporter_args[@]}"
exporter_pid=$last_bg
exporter_url=http://127.0.0.1:$exporter_port
for ((i = 0; ; i++)); do
  # grep without -q reads all of curl's output: with -q it may stop first and fail curl (pipefail).
  curl -fsS "$exporter_url/metrics" 2>/dev/null | grep '^pglock_up{target="e2e"} 1' >/dev/null && break
  alive exporter
  ((i < 150)) || fail "pglock_exporter does not report pglock_up{target=\"e2e\"} 1 after 30 s" \
    "$(curl -sS "$exporter_url/metrics" 2>&1 | grep -E '^pglock_(up|poll_errors)' || true)"
  sleep 0.2
done

# --- 3. webhook receiver, Alertmanager, Prometheus ----------------------------------------------------
e2e_start_webhook "$hooks" "$tmp/webhook.port"

am_port=$(free_port)
cat >"$tmp/alertmanager/alertmanager.yml" <<EOF
route:
  receiver: webhook
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: webhook
    webhook_configs:
      - url: "$webhook_url"
        send_resolved: true
EOF
say "Alertmanager on 127.0.0.1:$am_port, webhook at $webhook_url"
start_bg alertmanager "$logs/alertmanager.log" prometheus-alertmanager \
  --config.file="$tmp/alertmanager/alertmanager.yml" --storage.path="$tmp/alertmanager/data" \
  --web.listen-address="127.0.0.1:$am_port" --cluster.listen-address=
am_pid=$last_bg
am_url=http://127.0.0.1:$am_port

# Every `for:` cut to 2s but the pooled leak's, whose minute scenario i checks as shipped.
"$repo/alerts/shorten_for.sh" "$repo/alerts/pglock.rules.yml" "$tmp/prometheus/pglock.rules.yml" \
  PglockSessionLockThroughTransactionPooler \
  >"$logs/shorten_for.log" 2>&1 || fail "alerts/shorten_for.sh failed" "$(cat "$logs/shorten_for.log")"
prom_port=$(free_port)
cat >"$tmp/prometheus/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - "$tmp/prometheus/pglock.rules.yml"
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:$am_port"]
scrape_configs:
  - job_name: pglock
    static_configs:
      - targets: ["127.0.0.1:$exporter_port"]
EOF
promtool check config "$tmp/prometheus/prometheus.yml" >"$logs/promtool-check-config.log" 2>&1 ||
  fail "promtool check config rejects the generated Prometheus config" "$(cat "$logs/promtool-check-config.log")"
say "promtool check config: ok; Prometheus on 127.0.0.1:$prom_port"
start_bg prometheus "$logs/prometheus.log" prometheus --config.file="$tmp/prometheus/prometheus.yml" \
  --storage.tsdb.path="$tmp/prometheus/data" --storage.tsdb.retention.time=1d \
  --web.listen-address="127.0.0.1:$prom_port"
prom_url=http://127.0.0.1:$prom_port

e2e_wait_ready "$am_url" "$am_pid"
e2e_wait_ready "$prom_url" "$last_bg"

# Prometheus query: prints the JSON answer.
prom_query() { curl -fsS --max-time 10 "$prom_url/api/v1/query" --data-urlencode "query=$1"; }
# Reads an answer of the Prometheus API on stdin: promapi.py count|value|groups|alerts STATE.
promapi() { "$py" "$here/promapi.py" "$@"; }

for ((i = 0; ; i++)); do
  n=$(prom_query 'pglock_up{job="pglock",target="e2e"} == 1' 2>/dev/null | promapi count 2>/dev/null || echo 0)
  [[ $n == 1 ]] && break
  ((i < 150)) || fail "Prometheus has not scraped pglock_up{target=\"e2e\"} 1 after 30 s" \
    "$(curl -sS "$prom_url/api/v1/targets" 2>&1 | head -c 2000)"
  sleep 0.2
done
groups=$(curl -fsS "$prom_url/api/v1/rules" | promapi groups)
((groups > 0)) || fail "Prometheus loaded no rule groups from the shortened rules"
say "Prometheus scrapes the exporter; $groups rule groups loaded"

# Alerts Prometheus has in STATE (firing/pending), one line each.
prom_alerts() { curl -fsS "$prom_url/api/v1/alerts" | promapi alerts "$1"; }

# --- 4. quiet baseline ---------------------------------------------------------------------------------
say "quiet baseline: no workload for ${baseline_seconds}s"
sleep "$baseline_seconds" &
wait $!
firing=$(prom_alerts firing)
[[ -z $firing ]] || fail "alerts fire with no workload (Prometheus /api/v1/alerts):" "$firing"
if [[ -s $hooks ]]; then
  fail "the webhook received notifications with no workload:" "$("$py" "$here/alertlog.py" summary "$hooks")"
fi
pending=$(prom_alerts pending)
[[ -z $pending ]] || say "note: pending (not firing) during the baseline:"$'\n'"$pending"
say "baseline quiet: no firing alert, webhook received nothing"

# --- 5. scenarios --------------------------------------------------------------------------------------
# A psql session that runs the SQL lines given, then stays connected and idle (its stdin stays open)
# until cleanup stops its process group. TCP, so every session has a client_addr.
hold_session() { # NAME APPLICATION_NAME ROLE SQL...
  local name=$1 app=$2 role=$3
  shift 3
  # shellcheck disable=SC2016 # expanded by the inner bash
  start_bg "psql:$name" "$logs/psql-$name.log" bash -c \
    '{ printf "%s\n" "${@:3}"; exec sleep infinity; } | PGAPPNAME=$1 PGUSER=$2 "$PSQL" -X -q -A -t -v ON_ERROR_STOP=0' \
    _ "$app" "$role" "$@"
}
# Waits until SQL (as superuser) prints something non-empty; prints it. TIMEOUT in seconds.
wait_sql() { # TIMEOUT WHAT SQL
  local out i
  for ((i = 0; ; i++)); do
    out=$(sql "$3")
    if [[ -n $out ]]; then
      printf '%s\n' "$out"
      return 0
    fi
    ((i < $1 * 10)) || fail "$2 (no row after $1 s from: $3)"
    sleep 0.1
  done
}

declare -A started=()      # scenario -> start time
declare -A seen_at=()      # "alertname status" -> webhook receive time
declare -A seen_scn=()     # "alertname status" -> scenario
declare -a seen_order=()
allowed_alerts=(PglockAdvisoryLockWaitLong PglockLockAboutToBeDropped PglockAdvisoryLockLost
  PglockAdvisoryLockTakeover PglockLockHoldersExhaustClientPool PglockLeaseExpired
  PglockLeaseExpiredTakeover PglockSessionLockThroughTransactionPooler PglockPooledLockInherited)

# Waits for an alert at the webhook: SCENARIO TIMEOUT ALERTNAME STATUS [K=V ...]. Prints its JSON.
expect_alert() {
  local scn=$1 timeout=$2 name=$3 status=$4 out
  shift 4
  local args=()
  for kv in "$@"; do args+=(--label "$kv"); done
  local svc
  for svc in exporter webhook alertmanager prometheus; do alive "$svc"; done
  if ! out=$("$py" "$here/alertlog.py" wait "$hooks" --alertname "$name" --status "$status" \
    --timeout "$timeout" "${args[@]}" 2>"$tmp/alertlog.err"); then
    fail "scenario $scn: $name ($status) with labels $* did not reach the webhook within ${timeout}s" \
      "$(cat "$tmp/alertlog.err")" "  Prometheus alerts now:" "$(prom_alerts firing; prom_alerts pending)"
  fi
  local at
  at=$(printf '%s' "$out" | "$py" "$here/alertlog.py" field received_at)
  if [[ -z ${seen_at["$name $status"]:-} ]]; then
    seen_at["$name $status"]=$at
    seen_scn["$name $status"]=$scn
    seen_order+=("$name $status")
  fi
  say "  $scn: $name $status at the webhook, +$(since "${started[$scn]}" "$at")s after the scenario start"
  printf '%s\n' "$out" >"$tmp/last_alert.json"
}
# A time field (startsAt, endsAt) of the alert saved by the last expect_alert, as Unix time.
last_time() { "$py" "$here/alertlog.py" field --epoch "$1" <"$tmp/last_alert.json"; }

say "starting scenarios a (long wait), b (idle-in-transaction timeout), c (pool of four), d (lease), e (lease cycle), f (job loop), g (transaction locks through PgBouncer), i (a leak through PgBouncer under traffic) in parallel"

# i. a client takes a session lock through i's PgBouncer and leaves; then clients keep its one
# server connection busy about half the time (0.15 s transactions, 0.15 s apart).
i_psql() { PGPORT=$i_pgb_port PGUSER=jobs PGAPPNAME=$1 "$PSQL" -X -q -A -t -v ON_ERROR_STOP=1 -c "$2"; }
started[i]=$(now)
i_psql leaker "SELECT pg_advisory_lock(hashtextextended('pooled-leak', 0))" >/dev/null ||
  fail "i: the leak through PgBouncer failed"
# shellcheck disable=SC2016 # expanded by the inner bash
start_bg i-traffic "$logs/pooled-traffic.log" bash -c \
  'while [[ ! -e $2 ]]; do PGPORT=$1 PGUSER=jobs PGAPPNAME=pooled-traffic "$PSQL" -X -q -c "BEGIN; SELECT pg_sleep(0.15); COMMIT" >/dev/null; sleep 0.15; done' \
  _ "$i_pgb_port" "$tmp/i-traffic.stop"
i_traffic_pid=${bg_pids[-1]}

# e. the leases table's cycle on lease "sweep", one psql session paced by tests/e2e/lease_cycle.py.
e_seconds=${PGLOCK_E2E_LEASE_CYCLE:-120}
started[e]=$(now)
# shellcheck disable=SC2016 # expanded by the inner bash
start_bg e-cycle "$logs/psql-e-cycle.log" bash -c \
  '"$1" "$2" --lease sweep --seconds "$3" | PGAPPNAME=lease-cycle PGUSER=scheduler "$PSQL" -X -q -A -t -v ON_ERROR_STOP=1' \
  _ "$py" "$here/lease_cycle.py" "$e_seconds"
e_pid=${bg_pids[-1]}

# f. the job loop on lock job-loop, as long as e's cycle: one job a second, each its own session.
started[f]=$(now)
start_bg f-jobs "$logs/job-loop.log" env PGAPPNAME=job-loop PGUSER=jobs \
  "$py" "$here/job_loop.py" --psql "$PSQL" --lock-text job-loop --seconds "$e_seconds"
f_pid=${bg_pids[-1]}

# g. two job loops of transaction locks on lock pooled-xact through PgBouncer, as long as f.
started[g]=$(now)
g_pids=()
for g_loop in 1 2; do
  start_bg "g-jobs-$g_loop" "$logs/pooled-jobs-$g_loop.log" env PGAPPNAME="pooled-jobs-$g_loop" \
    PGUSER=jobs PGPORT="$PGB_PORT" \
    "$py" "$here/job_loop.py" --psql "$PSQL" --lock-text pooled-xact --seconds "$e_seconds" --kinds xact
  g_pids+=("${bg_pids[-1]}")
done

# a. a holder of report-daily, and a waiter that blocks behind it.
started[a]=$(now)
hold_session a-holder report-daily reporting "SELECT pg_advisory_lock(7742, hashtext('report-daily'));"
a_holder=$(wait_sql 10 "a: report-daily holder did not get its lock" \
  "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity s USING (pid)
   WHERE l.locktype = 'advisory' AND l.granted AND s.application_name = 'report-daily'")
hold_session a-waiter report-daily-retry reporting "SELECT pg_advisory_lock(7742, hashtext('report-daily'));"

# b. run 1 takes rebuild:run on a connection left idle in transaction (role app_worker:
# 8 s timeout); run 2 retries every 100 ms and takes the lock once the server ended run 1's session.
started[b]=$(now)
hold_session b-run1 rebuild app_worker "BEGIN;" \
  "SELECT 'run 1 took the lock:', pg_try_advisory_lock(hashtextextended('rebuild:run', 0));"

# c. billing-worker's pool of four. Each connection first serves a request (a query of 1 to 4 s),
# then a round takes a session lock on it and keeps it, idle: the locks take the pool over one
# connection at a time, as in the incident (the alert tells a pool from dedicated lock connections
# so).
started[c]=$(now)
c_request=0
for job in sweep alerts mail-checks uptime:node-a; do
  c_request=$((c_request + 1))
  hold_session "c-$job" billing-worker billing "SELECT pg_sleep($c_request);" \
    "SELECT '$job', pg_try_advisory_lock(hashtext('$job'));"
done

# d. a lease, taken with the leases table's upsert for 3 s and never renewed (the holder crashed).
lease_upsert() { # HOLDER SECONDS -> prints t when the lease was taken
  PGAPPNAME=lease-runner PGUSER=scheduler "$PSQL" -X -q -A -t -v ON_ERROR_STOP=1 \
    -v name=mail-checks -v holder="$1" -v secs="$2" <<'SQL'
INSERT INTO leases (name, holder, taken_at, expires_at)
VALUES (:'name', :'holder', now(), now() + make_interval(secs => :secs))
ON CONFLICT (name) DO UPDATE
  SET holder = excluded.holder, taken_at = excluded.taken_at, expires_at = excluded.expires_at
  WHERE leases.expires_at < now()
RETURNING true;
SQL
}
started[d]=$(now)
d_holder1="host-a:1234:$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
[[ $(lease_upsert "$d_holder1" 3) == t ]] || fail "d: the first upsert did not take lease mail-checks"

b_run1=$(wait_sql 10 "b: run 1 did not take rebuild:run and go idle in transaction" \
  "SELECT s.pid || ' ' || extract(epoch FROM s.state_change) FROM pg_locks l JOIN pg_stat_activity s USING (pid)
   WHERE l.locktype = 'advisory' AND l.granted AND s.application_name = 'rebuild'
     AND s.state = 'idle in transaction'")
read -r b_pid b_idle_since <<<"$b_run1"
hold_session b-run2 rebuild app_worker \
  "DO \$\$BEGIN WHILE NOT pg_try_advisory_lock(hashtextextended('rebuild:run', 0)) LOOP PERFORM pg_sleep(0.1); END LOOP; END\$\$;" \
  "INSERT INTO e2e_events (name) VALUES ('run 2 took rebuild:run');"
a_waiter=$(wait_sql 10 "a: the waiter is not waiting for report-daily" \
  "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity s USING (pid)
   WHERE l.locktype = 'advisory' AND NOT l.granted AND s.application_name = 'report-daily-retry'")
started[a]=$(now) # the wait starts now
say "  a: pid $a_waiter waits for report-daily held by pid $a_holder"
say "  b: run 1 (pid $b_pid) holds rebuild:run, idle in transaction; the server ends it at +8 s"
say "  c: 4 billing-worker connections each serve a request, then hold a session lock and sit idle"
say "  d: lease mail-checks taken by $d_holder1 for 3 s, never renewed"

# d: the lease sits expired -> PglockLeaseExpired; then host-b takes it over -> PglockLeaseExpiredTakeover.
expect_alert d 30 PglockLeaseExpired firing target=e2e lease=mail-checks severity=warning
d_holder2="host-b:5678:$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
[[ $(lease_upsert "$d_holder2" 60) == t ]] || fail "d: host-b could not take over the expired lease mail-checks"
started[d-takeover]=$(now)
say "  d: lease mail-checks taken over by $d_holder2"

# c: the pool of four.
expect_alert c 30 PglockLockHoldersExhaustClientPool firing target=e2e severity=critical \
  application_name=billing-worker usename=billing client_addr=127.0.0.1 datname=postgres

# b: about to be dropped, before the drop; then lost and taken over.
expect_alert b 30 PglockLockAboutToBeDropped firing target=e2e severity=critical pid="$b_pid" \
  application_name=rebuild usename=app_worker datname=postgres
b_warned_at=$(last_time startsAt)
b_taken=$(wait_sql 30 "b: run 2 never took rebuild:run (was run 1's session not ended by the timeout?)" \
  "SELECT extract(epoch FROM at) FROM e2e_events WHERE name = 'run 2 took rebuild:run'")
started[b-drop]=$b_taken
b_lead=$(since "$b_warned_at" "$b_taken")
awk -v l="$b_lead" 'BEGIN { exit !(l > 0) }' ||
  fail "b: PglockLockAboutToBeDropped started firing ${b_lead#-}s AFTER the lock was dropped (startsAt $b_warned_at, run 2 took the lock at $b_taken)"
say "  b: PglockLockAboutToBeDropped was firing ${b_lead}s before the drop (run 1 idle in transaction from +$(since "${started[b]}" "$b_idle_since")s, run 2 took the lock at +$(since "${started[b]}" "$b_taken")s)"
expect_alert b 30 PglockAdvisoryLockLost firing target=e2e severity=critical lock=rebuild:run \
  cause=idle_in_transaction_timeout datname=postgres
expect_alert b 30 PglockAdvisoryLockTakeover firing target=e2e severity=critical lock=rebuild:run datname=postgres
# The links in a fired alert are served by the exporter that raised it (runbook and on-call page).
for link in annotations.runbook_url annotations.locks_url; do
  url=$("$py" "$here/alertlog.py" field "$link" <"$tmp/last_alert.json")
  [[ $url == "$exporter_url/"* ]] || fail "$link of PglockAdvisoryLockTakeover is not on the exporter: $url"
  code=$(curl -s -o "$tmp/link.body" -w '%{http_code}' "$url")
  [[ $code == 200 ]] || fail "$link $url answers $code, not 200"
  if [[ $link == *locks_url ]]; then
    grep -q 'lock_takeover' "$tmp/link.body" && grep -q 'rebuild:run' "$tmp/link.body" ||
      fail "$url does not show the takeover of rebuild:run"
  else
    grep -q '<h1>PglockAdvisoryLockTakeover</h1>' "$tmp/link.body" || fail "$url is not the runbook"
  fi
  say "  b: $link $url answers 200"
done

# d: the takeover.
expect_alert d 30 PglockLeaseExpiredTakeover firing target=e2e severity=warning lease=mail-checks kind=expired_takeover

# Resolutions: the drop ends PglockLockAboutToBeDropped, the takeover ends PglockLeaseExpired.
expect_alert b 30 PglockLockAboutToBeDropped resolved target=e2e pid="$b_pid"
expect_alert d 30 PglockLeaseExpired resolved target=e2e lease=mail-checks

# a: the wait has to pass 30 s (threshold not shortened), plus for: 2s.
expect_alert a 90 PglockAdvisoryLockWaitLong firing target=e2e severity=warning lock=report-daily \
  waiter_pid="$a_waiter" blocker_pid="$a_holder" waiter_application_name=report-daily-retry \
  blocker_application_name=report-daily blocker_usename=reporting datname=postgres

# --- 6. dashboards, while every scenario is still active ------------------------------------------------
mapfile -t exprs < <("$repo/dashboards/exprs.sh") || true
((${#exprs[@]} > 0)) || fail "dashboards/exprs.sh printed no expression"
say "dashboards: sending ${#exprs[@]} expressions to /api/v1/query"
codes=()
for i in "${!exprs[@]}"; do
  codes+=("$(curl -sS --max-time 10 -o "$tmp/dash/$i.json" -w '%{http_code}' \
    "$prom_url/api/v1/query" --data-urlencode "query=${exprs[i]}" || echo 000)")
done
printf '%s\n' "${exprs[@]}" >"$tmp/dash/exprs.txt"
printf '%s\n' "${codes[@]}" >"$tmp/dash/codes.txt"
dash_report=$(promapi dashboards "$tmp/dash")
read -r _ dash_bad <<<"$(sed -n 1p <<<"$dash_report")"
read -r _ dash_data dash_total <<<"$(sed -n 2p <<<"$dash_report")"
dash_details=$(sed -n '3,$p' <<<"$dash_report")
((dash_bad == 0)) || fail "dashboards: $dash_bad of $dash_total expressions are not accepted by Prometheus:" "$dash_details"
dash_pct=$((100 * dash_data / dash_total))
say "dashboards: all $dash_total expressions succeed; $dash_data/$dash_total (${dash_pct}%) return data"
[[ -z $dash_details ]] || printf '%s\n' "$dash_details"
((dash_pct >= 60)) || fail "dashboards: only $dash_data of $dash_total expressions return data while the scenarios run (want >= 60%)" "$dash_details"

# Event panels use increase() on the raw counters; the alert rules use the *:increase5m recording
# rules, which also count the first event of a new series (it appears with the value 1). Informational.
prom_value() { prom_query "$1" | promapi value; }
for m in advisory_lock_losses advisory_lock_takeovers lease_transitions; do
  raw=$(prom_value "sum(increase(pglock_${m}_total{target=\"e2e\"}[1m]))")
  rec=$(prom_value "sum(pglock:${m}:increase5m{target=\"e2e\"})")
  note=""
  if awk -v r="$raw" -v c="$rec" 'BEGIN { exit !((r == "none" || r + 0 == 0) && c + 0 > 0) }'; then
    note="  <- events happened, but increase() on the raw counter (as the dashboards use it) shows none"
  fi
  say "  events: sum(increase(pglock_${m}_total[1m])) = $raw, sum(pglock:${m}:increase5m) = $rec$note"
done

# --- a: end the wait (cancel the waiter) -> PglockAdvisoryLockWaitLong resolves ------------------------
started[a-end]=$(now)
[[ $(sql "SELECT pg_cancel_backend($a_waiter)") == t ]] || fail "a: could not cancel the waiter pid $a_waiter"
expect_alert a-end 30 PglockAdvisoryLockWaitLong resolved target=e2e waiter_pid="$a_waiter"

# --- i: the leak through the pooler pages within its minute, traffic and all -------------------------
expect_alert i 90 PglockSessionLockThroughTransactionPooler firing target=e2e pooler=leakpool \
  severity=critical
# The real `for: 1m` held through the traffic: paged within 90 s of the leak (the first proof, the
# minute, an evaluation and Alertmanager's group_wait).
i_after=$(since "${started[i]}" "${seen_at["PglockSessionLockThroughTransactionPooler firing"]}")
awk -v s="$i_after" 'BEGIN { exit !(s <= 90) }' ||
  fail "i: the pooled leak paged ${i_after}s after the leak (want <= 90 s: the minute restarted)"
i_gauge='pglock_pooled_session_advisory_locks{target="e2e",pooler="leakpool"}'
i_zeros=$(prom_value "sum(count_over_time(($i_gauge == 0)[2m:1s])) or vector(0)")
say "  i: the pool's gauge was 0 for $i_zeros of the last 120 s (the wait for the first proof), then counted"
# The traffic stops between transactions: a client that left in the middle of one would make
# PgBouncer close the server connection, and the lock with it.
touch "$tmp/i-traffic.stop"
for ((n = 0; n < 50; n++)); do
  kill -0 "$i_traffic_pid" 2>/dev/null || break
  sleep 0.1
done
stop_pid "$i_traffic_pid"
i_unlocked=$(i_psql unlocker "SELECT pg_advisory_unlock(hashtextextended('pooled-leak', 0))" 2>&1) || true
[[ $i_unlocked == t ]] || fail "i: the leaked lock was not on the pool's one server connection" "$i_unlocked"
started[i-end]=$(now)
expect_alert i-end 30 PglockSessionLockThroughTransactionPooler resolved target=e2e pooler=leakpool

# --- e: the lease cycle ends; after the exporter's 12 s evidence delay, no overlap and no lease alert ---
for ((i = 0; i < e_seconds + 60; i++)); do
  kill -0 "$e_pid" 2>/dev/null || break
  sleep 1
done
! kill -0 "$e_pid" 2>/dev/null || fail "e: the lease cycle did not end after $((e_seconds + 60)) s"
e_rounds=$(grep -c '^t$' "$logs/psql-e-cycle.log" || true)
((e_rounds >= e_seconds / 2)) || fail "e: only $e_rounds lease rounds in ${e_seconds}s" "$(tail -n 5 "$logs/psql-e-cycle.log")"
sleep 16
e_kind() { prom_value "sum(pglock_lease_transitions_total{target=\"e2e\",lease=\"sweep\",kind=\"$1\"})"; }
e_handover=$(e_kind handover) e_overlap=$(e_kind overlap) e_expired=$(e_kind expired_takeover)
say "  e: $e_rounds rounds of take, work, DELETE on lease sweep: handover=$e_handover overlap=$e_overlap expired_takeover=$e_expired"
[[ $e_overlap == 0 && $e_expired == 0 ]] || fail "e: the leases table's own cycle counted overlap=$e_overlap expired_takeover=$e_expired"
awk -v h="$e_handover" 'BEGIN { exit !(h + 0 > 0) }' || fail "e: no hand-over counted on lease sweep ($e_handover)"
e_alerts=$(prom_query 'ALERTS{lease="sweep"}[15m]' | promapi count)
((e_alerts == 0)) || fail "e: lease alerts for the leases table's own cycle:" "$(prom_query 'ALERTS{lease="sweep"}[15m]')"
e_hooks=$("$py" "$here/alertlog.py" summary "$hooks" | grep 'lease="sweep"' || true)
[[ -z $e_hooks ]] || fail "e: the webhook received a lease alert for the leases table's own cycle:" "$e_hooks"

# --- f: the job loop ended; its lock was handed over and released, never lost or taken over ------
for ((i = 0; i < 60; i++)); do
  kill -0 "$f_pid" 2>/dev/null || break
  sleep 1
done
! kill -0 "$f_pid" 2>/dev/null || fail "f: the job loop did not end" "$(tail -n 5 "$logs/job-loop.log")"
f_summary=$(grep '^job-loop: .* jobs' "$logs/job-loop.log" || true)
[[ $f_summary == *" 0 failed" ]] || fail "f: job loop jobs failed" "$(tail -n 20 "$logs/job-loop.log")"
read -r _ f_jobs _ <<<"$f_summary"
((f_jobs >= e_seconds * 9 / 10)) || fail "f: only $f_jobs jobs in ${e_seconds}s" "$f_summary"
sleep 4 # the exporter judges the last jobs' interval
f_sum() { prom_value "sum(${1}{target=\"e2e\",lock=\"job-loop\"${2:-}})"; }
f_losses=$(f_sum pglock_advisory_lock_losses_total) f_takeovers=$(f_sum pglock_advisory_lock_takeovers_total)
f_unlocked=$(f_sum pglock_advisory_lock_releases_total ',reason="unlocked"')
f_closed=$(f_sum pglock_advisory_lock_releases_total ',reason="session_closed"')
f_handovers=$(f_sum pglock_advisory_lock_handovers_total)
f_counts="losses=$f_losses takeovers=$f_takeovers releases unlocked=$f_unlocked session_closed=$f_closed handovers=$f_handovers"
say "  f: $f_summary; $f_counts"
[[ $f_losses == 0 && $f_takeovers == 0 ]] || fail "f: the job loop's normal locking counted $f_counts"
awk -v a="$f_unlocked" -v b="$f_closed" -v c="$f_handovers" 'BEGIN { exit !(a + b + c > 0) }' ||
  fail "f: the exporter saw none of the job loop's releases or hand-overs ($f_counts)"
f_query='count_over_time(ALERTS{lock="job-loop"}[15m]) or count_over_time(ALERTS{application_name="job-loop"}[15m])'
f_alerts=$(prom_query "$f_query" | promapi count)
((f_alerts == 0)) || fail "f: alerts about the job loop:" "$(prom_query "$f_query")"
f_hooks=$("$py" "$here/alertlog.py" summary "$hooks" | grep -E 'lock="job-loop"|application_name="job-loop"' || true)
[[ -z $f_hooks ]] || fail "f: the webhook received an alert about the job loop:" "$f_hooks"

# --- g: transaction locks through the pooler were never taken for session locks ----------------------
for g_pid in "${g_pids[@]}"; do
  for ((i = 0; i < 60; i++)); do
    kill -0 "$g_pid" 2>/dev/null || break
    sleep 1
  done
  ! kill -0 "$g_pid" 2>/dev/null || fail "g: a pooled job loop did not end"
done
g_jobs=0
for g_loop in 1 2; do
  g_summary=$(grep '^job-loop: .* jobs' "$logs/pooled-jobs-$g_loop.log" || true)
  [[ $g_summary == *" 0 failed" ]] || fail "g: pooled job loop $g_loop failed" "$(tail -n 20 "$logs/pooled-jobs-$g_loop.log")"
  read -r _ n _ <<<"$g_summary"
  g_jobs=$((g_jobs + n))
done
g_gauge_series=$(prom_query 'pglock_pooled_session_advisory_locks{target="e2e",pooler="pgbouncer"}' | promapi count)
((g_gauge_series > 0)) || fail "g: no pglock_pooled_session_advisory_locks series for the pool: nothing was tested"
g_counted=$(prom_value 'max_over_time(sum(pglock_pooled_session_advisory_locks{target="e2e",pooler="pgbouncer"})[15m:1s])')
g_inherited=$(prom_value 'sum(pglock_pooled_session_lock_inherited_total{target="e2e",pooler="pgbouncer"})')
g_seen=$(prom_value 'max_over_time(sum(pglock_advisory_locks_held{target="e2e"})[15m:1s])')
say "  g: $g_jobs transaction-lock jobs through PgBouncer; pooled session locks at most $g_counted, inherited_total $g_inherited"
[[ $g_counted == 0 && $g_inherited == 0 ]] ||
  fail "g: transaction locks through the pooler were taken for session locks (gauge max $g_counted, inherited $g_inherited)"
awk -v n="$g_seen" 'BEGIN { exit !(n + 0 > 0) }' || fail "g: the exporter never saw an advisory lock held"
g_query='count_over_time(ALERTS{alertname=~"PglockPooledLockInherited|PglockSessionLockThroughTransactionPooler",pooler="pgbouncer"}[15m])'
g_alerts=$(prom_query "$g_query" | promapi count)
((g_alerts == 0)) || fail "g: pooled alerts (firing or pending) for transaction locks:" "$(prom_query "$g_query")"

# --- h: the exporter killed and started again; a lock lost and taken over meanwhile still pages --
# The exporter keeps its state (--storage.path). It is killed (SIGKILL: no last write) while a
# session holds restart-demo; the holder is terminated and another session takes the key; the
# exporter starts again and its first poll judges the gap against the saved state: the loss
# counter moves on from its saved 0, so the shipped rules page. Prometheus' scrapes fail while it is
# down: PglockTargetDown may page too, and rightly.
allowed_alerts+=(PglockTargetDown)
started[h]=$(now)
h_holds="SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory'
  AND l.granted AND a.application_name = '%s' AND (l.classid::bigint << 32 | l.objid::bigint)
  = hashtextextended('restart-demo', 0)"
hold_session h-run1 restart-demo-1 app_worker "SELECT pg_advisory_lock(hashtextextended('restart-demo', 0));"
# shellcheck disable=SC2059 # the format is ours
h_run1=$(wait_sql 10 "h: run 1 did not take restart-demo" "$(printf "$h_holds" restart-demo-1)")
for ((i = 0; ; i++)); do
  grep -q ",$h_run1,true,true," "$state_dir/e2e.state.json" 2>/dev/null && break
  ((i < 150)) || fail "h: the exporter's state never showed run 1 (pid $h_run1) holding restart-demo"
  sleep 0.2
done
kill -KILL "$exporter_pid"
wait "$exporter_pid" 2>/dev/null || true
unset "bg_name[$exporter_pid]"
sql "SELECT pg_terminate_backend($h_run1)" >/dev/null
hold_session h-run2 restart-demo-2 app_worker "SELECT pg_advisory_lock(hashtextextended('restart-demo', 0));"
# shellcheck disable=SC2059
h_run2=$(wait_sql 10 "h: run 2 did not take restart-demo" "$(printf "$h_holds" restart-demo-2)")
start_bg exporter "$logs/exporter.log" "$exporter" "${exporter_args[@]}"
exporter_pid=$last_bg
say "  h: exporter killed holding run 1's lock (pid $h_run1), run 1 terminated, run 2 (pid $h_run2) took it, exporter started again"
expect_alert h 60 PglockAdvisoryLockLost firing target=e2e severity=critical lock=restart-demo \
  cause=terminated datname=postgres
expect_alert h 60 PglockAdvisoryLockTakeover firing target=e2e severity=critical lock=restart-demo
curl -fsS "$exporter_url/api/v1/events" | grep -q '"exporter_gap"' ||
  fail "h: no event says it was judged across the exporter's gap"

# --- nothing unexpected fired --------------------------------------------------------------------------
mapfile -t names < <("$py" "$here/alertlog.py" names "$hooks")
unexpected=()
for n in "${names[@]}"; do
  ok=0
  for a in "${allowed_alerts[@]}"; do [[ $n == "$a" ]] && ok=1; done
  ((ok)) || unexpected+=("$n")
done
((${#unexpected[@]} == 0)) || fail "alerts that no scenario should cause reached the webhook: ${unexpected[*]}" \
  "$("$py" "$here/alertlog.py" summary "$hooks")"

# --- 7. summary ----------------------------------------------------------------------------------------
echo
echo "Alerts at the webhook (seconds from the scenario step that causes them):"
printf '  %-36s %-9s %-9s %8s\n' alert status scenario seconds
for key in "${seen_order[@]}"; do
  scn=${seen_scn[$key]}
  ref=${started[$scn]}
  case "$key" in
    "PglockAdvisoryLockLost firing" | "PglockAdvisoryLockTakeover firing" | \
      "PglockLockAboutToBeDropped resolved")
      ref=${started[b-drop]}; scn="b-drop" ;;
    "PglockLeaseExpiredTakeover firing" | "PglockLeaseExpired resolved")
      ref=${started[d-takeover]}; scn="d-takeover" ;;
  esac
  printf '  %-36s %-9s %-11s %6s\n' "${key% *}" "${key##* }" "$scn" "$(since "$ref" "${seen_at[$key]}")"
done
echo "  (a: from the start of the wait; a-end: from pg_cancel_backend of the waiter; b: from run 1's"
echo "   BEGIN; b-drop: from run 2 taking the lock after the server ended run 1; c: from the pool's"
echo "   start; d: from the 3 s lease upsert; d-takeover: from host-b's takeover)"
echo "Job loop (f): ${f_summary#job-loop: }; $f_counts; no alert."
echo "Pooled transaction locks (g): $g_jobs jobs through PgBouncer; no pooled session lock, no inheritance, no pooled alert."
echo "Lease cycle (e): $e_rounds rounds in ${e_seconds}s, handover=$e_handover overlap=$e_overlap expired_takeover=$e_expired, no lease alert."
echo "  PglockLockAboutToBeDropped started firing ${b_lead}s before the server dropped the lock."
echo "Dashboards: $dash_data/$dash_total expressions returned data (${dash_pct}%), all $dash_total succeeded."
echo "Everything the webhook received:"
"$py" "$here/alertlog.py" summary "$hooks"
echo
say "PASS ($(since "$t0")s in total)"
