#!/usr/bin/env bash
# The on-call page in a real browser, then under load:
#   1. a throwaway PostgreSQL with a holder of lock "report-daily" (two waiters behind it), an
#      idle-in-transaction holder under a role timeout, and an expired lease; headless Chromium
#      opens /locks: the rendered DOM must show the pids and lock names; a phone-sized screenshot
#      is written to $PGLOCK_SCREENSHOT (default: the temporary directory).
#   2. with PGLOCK_LOAD=1: 1,000 leases churned into a full event ring, 200 waiters, then
#      tests/bench/locks_load.py: /locks with 10 concurrent clients, /metrics measured alongside.
# Needs: postgresql-15, chromium, curl, python3. Run as root or as a user that can run PostgreSQL.
set -euo pipefail
export LC_ALL=C
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd -- "$here/../.." && pwd)
exporter=${PGLOCK_EXPORTER_BINARY:-$repo/build/pglock_exporter}
# shellcheck source=scripts/lib/pg.sh
source "$repo/scripts/lib/pg.sh"
say() { printf '[locks_page] %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
command -v chromium >/dev/null || fail "chromium not installed (scripts/install-deps.sh test)"
[[ -x $exporter ]] || fail "no exporter at $exporter"
pg_find_bin || exit 1

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pglock-locks.XXXXXX")
chmod 755 "$tmp"
mkdir -p "$tmp/logs"
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  pg_stop immediate
  ((rc == 0)) || tail -n 20 "$tmp/logs/exporter.log" >&2 || true
  rm -rf -- "$tmp"
  exit "$rc"
}
trap cleanup EXIT

pg_init "$tmp" "$tmp/logs" --auth-local=trust --auth-host=trust || fail "initdb"
pg_start "max_connections = 300" || fail "postgres did not start"
pg_psql -d postgres <<'SQL'
CREATE ROLE report_job LOGIN;
ALTER ROLE report_job SET idle_in_transaction_session_timeout = '10min';
CREATE TABLE leases (name text PRIMARY KEY, holder text, taken_at timestamptz, expires_at timestamptz);
INSERT INTO leases VALUES ('mail-checks', 'node-2:4242:<b>9f</b>', now() - interval '20 min', now() - interval '5 min');
SQL
port=$(free_port)
# max_leases above the table's rows: transitions are judged only on complete reads.
python3 "$repo/scripts/lib/example_config.py" --name main \
  --dsn "host=127.0.0.1 port=$PG_PORT dbname=postgres user=postgres" \
  --poll interval=1s --poll top_n=200 --poll max_leases=2000 \
  --lock name=report-daily,key1=7742,key2_text=report-daily --lease leases >"$tmp/config.toml"
"$exporter" --config.file="$tmp/config.toml" --web.listen-address="127.0.0.1:$port" \
  >"$tmp/logs/exporter.log" 2>&1 &
pids+=($!)
url=http://127.0.0.1:$port
psql_bg() {  # APPLICATION_NAME ROLE SQL: a session kept open in the background
  PGAPPNAME=$1 "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U "$2" -d postgres -c "$3" \
    >/dev/null 2>&1 &
  pids+=($!)
}
psql_bg report-worker-1 postgres "SELECT pg_advisory_lock(7742, hashtext('report-daily')); SELECT pg_sleep(600)"
sleep 0.5
psql_bg report-worker-2 postgres "SELECT pg_advisory_lock(7742, hashtext('report-daily'))"
psql_bg report-worker-3 postgres "SELECT pg_advisory_lock(7742, hashtext('report-daily'))"
# a holder idle in an open transaction under a role timeout (psql reads the rest from a pipe that
# stays open)
mkfifo "$tmp/idle.fifo"
PGAPPNAME=rebuild-1 "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U report_job -d postgres \
  <"$tmp/idle.fifo" >/dev/null 2>&1 &
pids+=($!)
exec 7>"$tmp/idle.fifo"
printf "BEGIN;\nSELECT pg_advisory_lock(99);\n" >&7

q() { pg_psql -d postgres -Atc "$1"; }
for ((i = 0; i < 100; i++)); do
  [[ $(q "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted") == 2 ]] &&
    curl -fsS "$url/api/v1/locks" 2>/dev/null | grep '"report-worker-3"' >/dev/null && break
  sleep 0.2
done
holder=$(q "SELECT pid FROM pg_stat_activity WHERE application_name = 'report-worker-1'")
waiters=$(q "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE application_name IN ('report-worker-2', 'report-worker-3')")
idle=$(q "SELECT pid FROM pg_stat_activity WHERE application_name = 'rebuild-1'")
say "holder $holder, waiters $waiters, idle in transaction $idle"

chrome() {
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$tmp/chrome-$1" "${@:2}" 2>>"$tmp/logs/chromium.log"
}
chrome dom --dump-dom "$url/locks" >"$tmp/dom.html"
for want in "pid $holder" "report-daily" "pid $idle" "mail-checks" "expired" ${waiters// / }; do
  grep -qF -- "$want" "$tmp/dom.html" || fail "the rendered /locks has no \"$want\""
done
grep -qF '&lt;b&gt;9f&lt;/b&gt;' "$tmp/dom.html" || fail "the lease holder is not escaped in the DOM"
say "Chromium's DOM of /locks shows holder, waiters, lock names, the idle holder and the lease"
shot=${PGLOCK_SCREENSHOT:-$tmp/locks.png}
chrome shot --hide-scrollbars --window-size=430,1100 --screenshot="$shot" "$url/locks" >/dev/null
[[ -s $shot ]] || fail "no screenshot"
say "screenshot: $shot"

[[ ${PGLOCK_LOAD:-0} == 1 ]] || exit 0
say "load: 1,000 leases churned into a full event ring, 200 waiters"
q "INSERT INTO leases SELECT 'job-' || g, 'host:' || g, now(), now() + interval '1 hour' FROM generate_series(1, 1000) g" >/dev/null
sleep 2.5
q "DELETE FROM leases WHERE name LIKE 'job-%'" >/dev/null
sleep 2.5
q "INSERT INTO leases SELECT 'job-' || g, 'host:' || g, now(), now() + interval '1 hour' FROM generate_series(1, 1000) g" >/dev/null
for ((i = 0; i < 198; i++)); do
  psql_bg "load-waiter-$i" postgres "SELECT pg_advisory_lock(7742, hashtext('report-daily'))"
done
for ((i = 0; i < 150; i++)); do
  [[ $(curl -fsS "$url/metrics" | sed -n 's/^pglock_advisory_lock_waiters{.*} //p' | head -1) == 200 ]] && break
  sleep 0.2
done
sleep 2
events=$(curl -fsS "$url/api/v1/events" | grep -o '"kind"' | wc -l || true)
((events >= 1000)) || fail "the event ring holds $events events, not 1000"
say "ring holds $events events; $(curl -fsS "$url/locks" | wc -c) bytes of /locks"
python3 "$repo/tests/bench/locks_load.py" --url "$url" --clients 0 --seconds 10
python3 "$repo/tests/bench/locks_load.py" --url "$url" --clients 10 --seconds 20
