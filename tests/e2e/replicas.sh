#!/usr/bin/env bash
# Replicas that page once, end to end: two pglock_exporter processes with the same config poll one
# real PostgreSQL; a real Prometheus scrapes both (one job) with alerts/pglock.replicas.rules.yml
# (every `for:` cut to 2s by alerts/shorten_for.sh but the stuck pool's 1m, kept so that an
# exporter can be killed while it is pending); a real Alertmanager routes as docs/fleet.md says to a
# webhook receiver (tests/e2e/webhook.py) that logs every notification. Incidents, driven with psql:
#
#   1. both exporters up: a session holding lock replica-loss is terminated, then another takes the
#      key                               -> one PglockAdvisoryLockLost, one PglockAdvisoryLockTakeover
#   2. a client's pool of four serves requests, then its connections end up idle holding session
#      locks; exporter A is killed (SIGKILL) while the alert is pending
#                                        -> one PglockLockHoldersExhaustClientPool, from B
#   3. A started again, then B killed while that alert fires
#                                        -> PglockLockHoldersExhaustClientPool neither resolves nor
#                                           pages again
#   and after the deaths, the loss and the takeover (still in their 5-minute window) do not page
#   again.
# Counts the notifications that carry each alert firing: exactly one per incident, and none that
# resolves it while it lasts. PglockTargetDown
# for the killed exporter (about that exporter, with its instance) is expected and not counted.
# Everything in a temporary directory on free ports, stopped and removed on exit, failure included.
#
# Environment: PGLOCK_EXPORTER_BINARY (default <repo>/build/pglock_exporter), PGLOCK_E2E_KEEP=1.
# Needs: postgresql-15, prometheus, prometheus-alertmanager, python3, curl (Debian packages).
set -euo pipefail
export LC_ALL=C

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd -- "$here/../.." && pwd)
exporter=${PGLOCK_EXPORTER_BINARY:-$repo/build/pglock_exporter}
# shellcheck source=scripts/lib/pg.sh
source "$repo/scripts/lib/pg.sh"
# shellcheck source=scripts/lib/bg.sh
source "$repo/scripts/lib/bg.sh"
py=/usr/bin/python3
[[ -x $py ]] || py=$(command -v python3 || echo python3)

E2E_NAME=replicas # say's prefix (tests/e2e/lib/live.sh)
# shellcheck source=tests/e2e/lib/live.sh
source "$here/lib/live.sh"

[[ -x $exporter ]] || fail "no exporter binary at $exporter"
pg_find_bin || exit 1
for tool in prometheus promtool prometheus-alertmanager curl; do
  command -v "$tool" >/dev/null || fail "$tool not found"
done

tmp=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  [[ -n $tmp && -d $tmp ]] || exit "$rc"
  if ((rc != 0)); then
    for f in "$tmp"/logs/*.log; do
      [[ -s $f ]] || continue
      printf '\n---- %s (last lines) ----\n' "${f##*/}" >&2
      tail -n 12 "$f" >&2
    done
  fi
  stop_named prometheus
  stop_named alertmanager
  local i
  for ((i = ${#bg_pids[@]} - 1; i >= 0; i--)); do stop_pid "${bg_pids[i]}"; done
  pg_stop immediate
  if [[ ${PGLOCK_E2E_KEEP:-0} == 1 ]]; then echo "replicas: kept $tmp" >&2; else rm -rf -- "$tmp"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pglock-replicas.XXXXXX")
mkdir -p "$tmp/logs" "$tmp/prometheus/data" "$tmp/alertmanager/data"
chmod 700 "$tmp"
logs=$tmp/logs
hooks=$tmp/webhook.jsonl
: >"$hooks"

# --- PostgreSQL --------------------------------------------------------------------------------------
pg_init "$tmp" "$logs" --auth-local=trust --auth-host=scram-sha-256 ||
  fail "initdb failed" "$(tail -n 20 "$logs/initdb.log")"
pg_port=$PG_PORT
password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
printf '127.0.0.1:%s:*:*:%s\n' "$pg_port" "$password" >"$tmp/pgpass"
chmod 600 "$tmp/pgpass"
pg_start "shared_buffers = 32MB" || fail "PostgreSQL did not start" "$(tail -n 20 "$logs/postgres.log" 2>/dev/null)"
sql() { pg_psql -d postgres -A -t -c "$1"; }
pg_psql -d postgres -v ON_ERROR_STOP=1 -q -v pw="$password" >/dev/null <<'SQL'
CREATE ROLE pglock_exporter LOGIN PASSWORD :'pw';
GRANT pg_monitor TO pglock_exporter;
CREATE ROLE worker LOGIN PASSWORD :'pw';
CREATE ROLE billing LOGIN PASSWORD :'pw';
SQL
export PGHOST=127.0.0.1 PGPORT=$pg_port PGDATABASE=postgres PGPASSFILE=$tmp/pgpass PSQL=$PG_BIN/psql
say "PostgreSQL $PG_VERSION on 127.0.0.1:$pg_port"

# --- two exporters, one config ------------------------------------------------------------------------
config=$tmp/pglock_exporter.toml
"$py" "$repo/scripts/lib/example_config.py" --comment "written by tests/e2e/replicas.sh" \
  --name main --dsn "host=127.0.0.1 port=$pg_port dbname=postgres user=pglock_exporter passfile=$tmp/pgpass" \
  --poll interval=1s --lock name=replica-loss,key_text=replica-loss >"$config"
declare -A port pid
for r in a b; do
  port[$r]=$(free_port)
  start_bg "exporter-$r" "$logs/exporter-$r.log" "$exporter" --config.file="$config" \
    --web.listen-address="127.0.0.1:${port[$r]}" --log.level=info
  pid[$r]=$last_bg
done
for r in a b; do
  for ((i = 0; ; i++)); do
    curl -fsS "http://127.0.0.1:${port[$r]}/metrics" 2>/dev/null | grep '^pglock_up{target="main"} 1' >/dev/null && break
    ((i < 150)) || fail "exporter $r does not report pglock_up 1 after 30 s"
    sleep 0.2
  done
done
say "exporters a (127.0.0.1:${port[a]}) and b (127.0.0.1:${port[b]}) poll target main"

# --- webhook, Alertmanager (the routing of docs/fleet.md, faster), Prometheus -------------------------
e2e_start_webhook "$hooks" "$tmp/webhook.port"
am_port=$(free_port)
cat >"$tmp/alertmanager/alertmanager.yml" <<EOF
route:
  receiver: webhook
  group_by: [alertname, job, target]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: webhook
    webhook_configs:
      - url: "$webhook_url"
        send_resolved: true
EOF
start_bg alertmanager "$logs/alertmanager.log" prometheus-alertmanager \
  --config.file="$tmp/alertmanager/alertmanager.yml" --storage.path="$tmp/alertmanager/data" \
  --web.listen-address="127.0.0.1:$am_port" --cluster.listen-address=
am_pid=$last_bg
"$repo/alerts/shorten_for.sh" "$repo/alerts/pglock.replicas.rules.yml" "$tmp/prometheus/rules.yml" \
  PglockLockHoldersExhaustClientPool >"$logs/shorten_for.log" 2>&1 ||
  fail "alerts/shorten_for.sh failed" "$(cat "$logs/shorten_for.log")"
prom_port=$(free_port)
cat >"$tmp/prometheus/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - "$tmp/prometheus/rules.yml"
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:$am_port"]
scrape_configs:
  - job_name: pglock
    static_configs:
      - targets: ["127.0.0.1:${port[a]}", "127.0.0.1:${port[b]}"]
EOF
start_bg prometheus "$logs/prometheus.log" prometheus --config.file="$tmp/prometheus/prometheus.yml" \
  --storage.tsdb.path="$tmp/prometheus/data" --web.listen-address="127.0.0.1:$prom_port"
prom_url=http://127.0.0.1:$prom_port
e2e_wait_ready "http://127.0.0.1:$am_port" "$am_pid"
e2e_wait_ready "$prom_url" "$last_bg"
prom_query() { curl -fsS --max-time 10 "$prom_url/api/v1/query" --data-urlencode "query=$1"; }
for ((i = 0; ; i++)); do
  n=$(prom_query 'count(pglock_up{job="pglock",target="main"} == 1)' | "$py" "$here/promapi.py" value 2>/dev/null || echo none)
  [[ $n == 2 ]] && break
  ((i < 150)) || fail "Prometheus does not scrape both exporters after 30 s"
  sleep 0.2
done
say "Prometheus scrapes both; Alertmanager groups by alertname, job, target"

# Notifications (payloads) that carry ALERTNAME with STATUS (firing, resolved). Prints the count.
count_py='
import json, sys
n = 0
for line in open(sys.argv[1]):
    p = json.loads(line)
    if any(a["labels"].get("alertname") == sys.argv[2] and a["status"] == sys.argv[3] for a in p["alerts"]):
        n += 1
print(n)
'
firing_notifications() { "$py" -c "$count_py" "$hooks" "$1" firing; }
resolved_notifications() { "$py" -c "$count_py" "$hooks" "$1" resolved; }
wait_firing() { # ALERTNAME TIMEOUT
  for ((i = 0; i < $2 * 5; i++)); do
    (($(firing_notifications "$1") >= 1)) && return 0
    sleep 0.2
  done
  fail "$1 did not reach the webhook within $2 s" "$(curl -fsS "$prom_url/api/v1/alerts")"
}
hold() { # NAME ROLE APPLICATION SQL...: a psql session that runs SQL, then stays connected
  local name=$1 role=$2 app=$3
  shift 3
  # shellcheck disable=SC2016 # expanded by the inner bash
  start_bg "psql-$name" "$logs/psql-$name.log" bash -c \
    '{ printf "%s\n" "${@:3}"; exec sleep infinity; } | PGUSER=$1 PGAPPNAME=$2 "$PSQL" -X -q -A -t' \
    _ "$role" "$app" "$@"
}
wait_sql() { # TIMEOUT SQL: until it prints something; prints it
  local out
  for ((i = 0; i < $1 * 10; i++)); do
    out=$(sql "$2")
    [[ -n $out ]] && { printf '%s\n' "$out"; return 0; }
    sleep 0.1
  done
  fail "no row after $1 s from: $2"
}

# --- 1. a loss and a takeover, both exporters up ------------------------------------------------------
holds="SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory'
  AND l.granted AND a.application_name = '%s'"
hold run1 worker run-1 "SELECT pg_advisory_lock(hashtextextended('replica-loss', 0));"
# shellcheck disable=SC2059 # the format is ours
run1=$(wait_sql 10 "$(printf "$holds" run-1)")
sleep 3 # both exporters see the holder
sql "SELECT pg_terminate_backend($run1)" >/dev/null
hold run2 worker run-2 "SELECT pg_advisory_lock(hashtextextended('replica-loss', 0));"
# shellcheck disable=SC2059
wait_sql 10 "$(printf "$holds" run-2)" >/dev/null
wait_firing PglockAdvisoryLockLost 30
wait_firing PglockAdvisoryLockTakeover 30
say "1. loss and takeover at the webhook"

# --- 2. a stuck pool; exporter a killed while its alert is pending ------------------------------------
# billing-worker's pool of four: each connection serves a request (1 to 4 s), then takes a session
# lock and sits idle on it, as in the incident.
n=0
for job in sweep alerts mail-checks uptime; do
  n=$((n + 1))
  hold "pool-$job" billing billing-worker "SELECT pg_sleep($n);" "SELECT pg_try_advisory_lock(hashtext('$job'));"
done
for ((i = 0; ; i++)); do
  pending=$(curl -fsS "$prom_url/api/v1/alerts" | "$py" "$here/promapi.py" alerts pending 2>/dev/null |
    grep -c PglockLockHoldersExhaustClientPool || true)
  ((pending >= 1)) && break
  ((i < 300)) || fail "PglockLockHoldersExhaustClientPool never became pending" "$(curl -fsS "$prom_url/api/v1/alerts")"
  sleep 0.2
done
kill -KILL "${pid[a]}"
wait "${pid[a]}" 2>/dev/null || true
unset "bg_name[${pid[a]}]"
killed_at=$EPOCHREALTIME
say "2. the stuck pool's alert is pending; exporter a killed"
wait_firing PglockLockHoldersExhaustClientPool 90
say "2. PglockLockHoldersExhaustClientPool at the webhook $(since "$killed_at") s after the kill"

# --- 3. exporter a back, then b killed while the alert fires: no second page --------------------------
# (With the shipped rules b's copy of the alert would resolve and Alertmanager notify the group again.)
start_bg exporter-a "$logs/exporter-a.log" "$exporter" --config.file="$config" \
  --web.listen-address="127.0.0.1:${port[a]}" --log.level=info
pid[a]=$last_bg
# Back means the alert's condition holds from its series too, its recording rules' included: a's
# raw series come back a scrape before the recorded ones (pglock:client_*), and b killed in that
# second would leave the alert no series for one evaluation (it resolved once so in CI).
for ((i = 0; ; i++)); do
  n=$(prom_query 'count(
      pglock_client_idle_lock_holding_sessions{job="pglock",target="main",application_name="billing-worker"} >= 4
      and pglock:client_idle_lock_holding_sessions:ratio >= 1
      and pglock:client_sessions:sum >= 2)' |
    "$py" "$here/promapi.py" value 2>/dev/null || echo none)
  [[ $n == 2 ]] && break
  ((i < 150)) || fail "Prometheus does not see the stuck pool from both exporters again after 30 s"
  sleep 0.2
done
kill -KILL "${pid[b]}"
wait "${pid[b]}" 2>/dev/null || true
unset "bg_name[${pid[b]}]"
say "3. exporter a back, exporter b killed while PglockLockHoldersExhaustClientPool fires"
sleep 10 # room for anything that would page again (group_interval is 1 s)

# --- counts ------------------------------------------------------------------------------------------
"$py" "$here/alertlog.py" summary "$hooks" >"$logs/summary.txt" 2>&1 || true
result=0
for a in PglockAdvisoryLockLost PglockAdvisoryLockTakeover PglockLockHoldersExhaustClientPool; do
  c=$(firing_notifications "$a") r=$(resolved_notifications "$a")
  say "notifications with $a firing: $c, resolved: $r"
  [[ $c == 1 && $r == 0 ]] || result=1
done
# Resolved while the incident lasts would be the page of one exporter's copy ending (and the next
# copy paging again once its own `for:` passed).
((result == 0)) ||
  fail "an incident paged more than once, not at all, or resolved while it lasted" "$(cat "$logs/summary.txt")"
instance_py='
import json, sys
for line in open(sys.argv[1]):
    for a in json.loads(line)["alerts"]:
        if a["labels"].get("alertname") == sys.argv[2]:
            print("instance" in a["labels"])
            sys.exit(0)
'
for a in PglockAdvisoryLockLost PglockAdvisoryLockTakeover PglockLockHoldersExhaustClientPool; do
  [[ $("$py" -c "$instance_py" "$hooks" "$a") == False ]] ||
    fail "$a carries an instance label: it would page once per exporter"
done
say "PASS: one notification per incident from two exporters, one of them killed mid-incident"
