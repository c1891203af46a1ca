#!/usr/bin/env bash
# The demo workload: psql clients that reproduce the lock incidents that pglock_exporter watches for
# and keep them going until killed. Started by scripts/demo.sh in a process group of its own; killing
# that group (or sending this script SIGTERM) ends every client. See scripts/demo/README.md.
#
# Environment (set by demo.sh):
#   PGHOST, PGPORT, PGDATABASE, PGPASSFILE   where the demo PostgreSQL listens (TCP, so every session
#                                            has a client_addr) and the password file for its roles
#   DEMO_LOG_DIR                             where each piece's psql output goes
#   DEMO_PGBOUNCER_PORT                      optional: PgBouncer (transaction pooling) in front of app
# Narration (what happens, and when) goes to stdout, one timestamped line per event.
set -euo pipefail

: "${PGHOST:?}" "${PGPORT:?}" "${PGDATABASE:?}" "${PGPASSFILE:?}" "${DEMO_LOG_DIR:?}"
export PGHOST PGPORT PGDATABASE PGPASSFILE
pgbouncer_port=${DEMO_PGBOUNCER_PORT:-}

start=$SECONDS

# Every child (psql clients, the sleeps feeding them, the loops) is in this script's process group:
# demo.sh starts the script as a group leader and kills the group. When the script is the leader,
# it also ends the group itself on exit (run by hand from an interactive shell, or sent SIGTERM).
# shellcheck disable=SC2317  # run by the EXIT trap
on_exit() {
  trap - EXIT
  trap '' TERM INT
  if [[ $(ps -o pgid= -p $$ | tr -d ' ') == "$$" ]]; then
    kill -TERM -- -$$ 2>/dev/null || true
  else
    local pids
    pids=$(jobs -p)
    # shellcheck disable=SC2086  # one argument per pid
    [[ -z $pids ]] || kill $pids 2>/dev/null || true
  fi
}
trap on_exit EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

say() {
  local t=$((SECONDS - start))
  printf '[workload %02d:%02d] %s\n' $((t / 60)) $((t % 60)) "$*"
}

# psql as application APP and role ROLE; remaining arguments go to psql.
pg() {
  local app=$1 role=$2
  shift 2
  PGAPPNAME=$app PGUSER=$role psql -X -q -A -t -v ON_ERROR_STOP=0 "$@"
}

# Opens one session as APP/ROLE, runs the SQL lines given, then keeps the session open and idle
# (psql waits for more input on its pipe) until the process group is killed. Output to LOG.
hold_session() {
  local app=$1 role=$2 log=$3
  shift 3
  { printf '%s\n' "$@"; exec sleep infinity; } | pg "$app" "$role" >>"$DEMO_LOG_DIR/$log.log" 2>&1 &
}

# Sleeps until SECONDS reaches $1 (no-op when that is already past).
sleep_until() {
  local d=$(($1 - SECONDS))
  if ((d > 0)); then sleep "$d"; fi
}

random_hex() {
  od -An -N8 -tx1 /dev/urandom | tr -d ' \n'
}

# --- (a) a pool of four, four session locks, four idle connections ---------------------------------
# The application's old TryExclusive: pg_try_advisory_lock(hashtext(job)) on a pooled connection that
# it then keeps for the whole round. Each connection serves a request first (5 to 20 s), so the locks
# take the pool over one connection at a time; an instance that won all four has no connection left.
billing_pool() {
  local job request=0
  for job in sweep alerts mail-checks uptime:node-a; do
    request=$((request + 5))
    hold_session billing-worker billing billing-worker "SELECT pg_sleep($request);" \
      "SELECT '$job', pg_try_advisory_lock(hashtext('$job'));"
  done
  say "(a) billing-worker: its pool of 4 connections serves requests, then each takes a session" \
      "advisory lock (sweep, alerts, mail-checks, uptime:node-a) and sits idle -> pool exhausted"
}

# --- (b) a long-held exclusive lock with waiters, and a shared-lock case ----------------------------
report_locks() {
  # A session lock survives COMMIT: the holder's connection looks idle and harmless.
  hold_session report-daily reporting report-daily \
    "SELECT pg_advisory_lock(7742, hashtext('report-daily'));" "COMMIT;"
  sleep 1
  local _
  for _ in 1 2; do
    hold_session report-daily-retry reporting report-daily \
      "SELECT pg_advisory_lock(7742, hashtext('report-daily'));"
  done
  say "(b) report-daily holds advisory lock (7742, hashtext('report-daily')) and is idle;" \
      "2 report-daily-retry sessions wait behind it (waits grow for the whole demo)"

  # Shared mode: two readers hold the same key shared, a writer waits for both (two wait edges).
  # One reader left a transaction open (idle in transaction, no timeout for its role), the other is
  # busy in a long statement.
  hold_session export-reader reporting nightly-export \
    "BEGIN;" "SELECT pg_advisory_lock_shared(7742, hashtext('nightly-export'));"
  hold_session export-reader reporting nightly-export \
    "SELECT pg_advisory_lock_shared(7742, hashtext('nightly-export'));" "SELECT pg_sleep(86400);"
  sleep 1
  hold_session export-writer reporting nightly-export \
    "SELECT pg_advisory_lock(7742, hashtext('nightly-export'));"
  say "(b) nightly-export (unnamed key 7742:hashtext('nightly-export')): 2 export-reader sessions" \
      "hold it shared (one idle in transaction, one busy), export-writer waits for both"
}

# --- (c) a session lock dropped by idle_in_transaction_session_timeout, then taken -------------------
# Role app_worker has idle_in_transaction_session_timeout = 45s in database app (ALTER ROLE ... IN
# DATABASE). Run N takes the lock on a connection whose driver opened a transaction (autobegin) and
# leaves it idle in transaction; the server ends the session after 45 s and the lock goes with it.
# Run N+1, trying every 200 ms, takes the lock. Run N's release step then fails, and an application
# that swallows that error logs a clean release. Repeats every 2 minutes.
readonly rebuild_key="hashtextextended('rebuild:run', 0)"
rebuild_cycle() {
  local run=1 cycle_start first second holder
  while :; do
    cycle_start=$SECONDS
    { printf '%s\n' "BEGIN;" "SELECT 'run $run took the lock:', pg_try_advisory_lock($rebuild_key);"
      sleep 70
      printf '%s\n' "SELECT 'run $run releases the lock:', pg_advisory_unlock($rebuild_key);"
    } | pg rebuild app_worker >>"$DEMO_LOG_DIR/rebuild.log" 2>&1 &
    first=$!
    say "(c) rebuild run #$run (role app_worker): BEGIN; pg_try_advisory_lock(hashtextextended('rebuild:run', 0))" \
        "-> holds it, idle in transaction; its 45s idle_in_transaction_session_timeout is running"
    sleep 1
    second=$((run + 1))
    { printf '%s\n' \
        "DO \$\$BEGIN WHILE NOT pg_try_advisory_lock($rebuild_key) LOOP PERFORM pg_sleep(0.2); END LOOP; END\$\$;" \
        "SELECT 'run $second took the lock at', now();"
      sleep 80
      printf '%s\n' "SELECT 'run $second releases the lock:', pg_advisory_unlock($rebuild_key);"
      sleep 8
    } | pg rebuild app_worker >>"$DEMO_LOG_DIR/rebuild.log" 2>&1 &
    say "(c) rebuild run #$second starts and retries pg_try_advisory_lock every 200 ms"

    sleep_until $((cycle_start + 48))
    holder=$(pg demo-narrator scheduler -c \
      "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
         AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = $rebuild_key" 2>/dev/null || true)
    say "(c) the server ended run #$run's session (idle-in-transaction timeout): its lock vanished" \
        "without an error; run #$second (pid ${holder:-?}) took it -> loss + takeover"
    if wait "$first"; then
      say "(c) run #$run: release step succeeded?! (unexpected)"
    else
      say "(c) run #$run: release step failed (connection gone); an app that swallows the error logs 'lock released'"
    fi
    sleep_until $((cycle_start + 92))
    say "(c) run #$second released the lock with pg_advisory_unlock (a clean release, not a loss)"
    sleep_until $((cycle_start + 120))
    run=$((run + 2))
  done
}

# --- (d) the fix for the pool of four: leases in a table -------------------------------------------
# Scaled down from the real leases (2-minute leases renewed every 30 s): 60-second leases renewed
# every 15 s.
# Each statement is a short connection of its own: a lease holds no connection.
lease_sql() {  # SQL NAME HOLDER SECONDS -> prints "t" when a row was touched
  printf '%s\n' "$1" |
    pg lease-runner scheduler -v name="$2" -v holder="$3" -v secs="$4" 2>>"$DEMO_LOG_DIR/leases.log"
}
lease_acquire() {  # NAME HOLDER SECONDS
  [[ $(lease_sql "INSERT INTO leases (name, holder, taken_at, expires_at)
                  VALUES (:'name', :'holder', now(), now() + make_interval(secs => :secs))
                  ON CONFLICT (name) DO UPDATE
                    SET holder = excluded.holder, taken_at = excluded.taken_at,
                        expires_at = excluded.expires_at
                    WHERE leases.expires_at < now()
                  RETURNING true;" "$@") == t ]]
}
lease_renew() {  # NAME HOLDER SECONDS
  [[ $(lease_sql "UPDATE leases SET expires_at = now() + make_interval(secs => :secs)
                  WHERE name = :'name' AND holder = :'holder' RETURNING true;" "$@") == t ]]
}
lease_release() {  # NAME HOLDER
  [[ $(lease_sql "DELETE FROM leases WHERE name = :'name' AND holder = :'holder' RETURNING true;" \
        "$@" 0) == t ]]
}

leases_loop() {
  declare -A holder lost
  local name t=0 k=0 offset new

  # Each call is its own holder: host, pid, 64 random bits.
  for name in sweep alerts; do
    holder[$name]="host-a:1234:$(random_hex)"
    lease_acquire "$name" "${holder[$name]}" 60 || true
  done
  # A report run that started 70 minutes ago and is still renewing: held too long.
  holder[nightly-report]="host-c:4711:$(random_hex)"
  lease_sql "INSERT INTO leases (name, holder, taken_at, expires_at)
             VALUES (:'name', :'holder', now() - interval '70 minutes',
                     now() + make_interval(secs => :secs))
             ON CONFLICT (name) DO NOTHING;" nightly-report "${holder[nightly-report]}" 60 >/dev/null || true
  # Node b's uptime runner died: its lease expires and nobody takes it over.
  lease_acquire uptime:node-b "host-b:5678:$(random_hex)" 30 || true
  say "(d) leases: sweep and alerts held and renewed by host-a:1234:<random>; nightly-report held" \
      "for 70 min; uptime:node-b expires in 30s and is never taken over"

  while :; do
    t=$((k * 5))
    offset=$((t % 180))
    # mail-checks: host-a takes it and stops renewing (crashed); host-b takes it over once expired,
    # renews it for a while and releases it.
    case $offset in
      0)
        holder[mail-checks]="host-a:1234:$(random_hex)"
        if lease_acquire mail-checks "${holder[mail-checks]}" 30; then
          say "(d) mail-checks: taken by ${holder[mail-checks]} (30s) and never renewed (holder crashed)"
        fi
        ;;
      75)
        holder[mail-checks]="host-b:5678:$(random_hex)"
        if lease_acquire mail-checks "${holder[mail-checks]}" 60; then
          say "(d) mail-checks: expired 45s ago, taken over by ${holder[mail-checks]} -> expired_takeover"
        fi
        ;;
      90 | 105 | 120 | 135) lease_renew mail-checks "${holder[mail-checks]}" 60 || true ;;
      150)
        if lease_release mail-checks "${holder[mail-checks]}"; then
          say "(d) mail-checks: released by its holder (row deleted)"
        fi
        ;;
    esac
    # sweep: released and re-acquired by a new call every 3 minutes.
    case $offset in
      140)
        if lease_release sweep "${holder[sweep]}"; then
          say "(d) sweep: round done, lease released"
        fi
        ;;
      160)
        holder[sweep]="host-a:1234:$(random_hex)"
        if lease_acquire sweep "${holder[sweep]}" 60; then
          say "(d) sweep: next round, lease acquired by ${holder[sweep]}"
        fi
        ;;
    esac
    # alerts: somebody hand-edits the holder while the lease is valid, every 4 minutes.
    if ((t % 240 == 100)); then
      if [[ $(lease_sql "UPDATE leases SET holder = :'holder', taken_at = now(),
                           expires_at = now() + make_interval(secs => :secs)
                         WHERE name = :'name' AND expires_at > now() RETURNING true;" \
               alerts "ops-laptop:31337:hand-edit" 45) == t ]]; then
        say "(d) alerts: holder hand-edited to ops-laptop:31337:hand-edit while host-a's lease was" \
            "valid -> overlap (two holders)"
      fi
    fi
    # Renewals every 15 s, as the holder's loop does; a renewal that touches no row means the
    # lease was lost: log it and take the lease again once it is free.
    if ((t % 15 == 0)); then
      for name in sweep alerts nightly-report; do
        if [[ $name == sweep ]] && ((offset >= 140 && offset < 160)); then continue; fi
        lease_renew "$name" "${holder[$name]}" 60 && continue
        new="host-a:1234:$(random_hex)"
        if lease_acquire "$name" "$new" 60; then
          say "(d) $name: lease was free again, re-acquired by $new"
          holder[$name]=$new
          lost[$name]=
        elif [[ -z ${lost[$name]:-} ]]; then
          say "(d) $name: renewal by ${holder[$name]} touched no row: lease lost, someone else" \
              "holds it (the application logs a warning and carries on)"
          lost[$name]=1
        fi
      done
    fi
    k=$((k + 1))
    sleep_until $((start + k * 5))
  done
}

# --- (e) a session lock leaking through a transaction-mode pooler ------------------------------------
pooler_leak() {
  local out
  out=$(PGHOST=127.0.0.1 PGPORT=$pgbouncer_port pg invoice-sender billing \
          -c "SELECT pg_backend_pid(), pg_advisory_lock(7742, hashtext('invoice-batch'));" \
          2>>"$DEMO_LOG_DIR/pgbouncer-client.log") || true
  say "(e) invoice-sender took a session advisory lock through PgBouncer (pool_mode=transaction)" \
      "and disconnected; server backend ${out%%|*} keeps the lock in the pool"
  sleep 20
  out=$(PGHOST=127.0.0.1 PGPORT=$pgbouncer_port pg invoice-checker billing \
          -c "SELECT pg_backend_pid(), pg_try_advisory_lock(7742, hashtext('invoice-batch'));" \
          2>>"$DEMO_LOG_DIR/pgbouncer-client.log") || true
  say "(e) invoice-checker, another client of the pool, asked for the same lock and got" \
      "'${out#*|}' on backend ${out%%|*}: it inherited a lock it never took"
}

# --- (f) the pile-up: an idle transaction, a migration queued behind it, readers behind the migration --
# checkout updates a row and leaves its transaction open (idle in transaction: it holds the row and a
# RowExclusiveLock on orders). The migration's ALTER TABLE asks for AccessExclusiveLock and queues
# behind it; every storefront reader asks for AccessShareLock, which conflicts with the queued ALTER,
# and queues behind the ALTER. Nothing moves until checkout ends; it never does in the demo.
pile_up() {
  hold_session checkout shop pile-up "BEGIN;" "UPDATE orders SET status = 'paid' WHERE id = 1;"
  sleep 2
  hold_session migrate shop pile-up "ALTER TABLE orders ADD COLUMN note text;"
  sleep 2
  local _
  for _ in 1 2 3 4; do
    hold_session storefront shop pile-up "SELECT count(*) FROM orders;"
  done
  say "(f) pile-up: checkout is idle in transaction holding a row of orders; migrate's ALTER TABLE" \
      "waits behind it; 4 storefront readers wait behind the ALTER (5 sessions blocked, depth 2)"
}

billing_pool
report_locks
pile_up
rebuild_cycle &
loops=($!)
leases_loop &
loops+=($!)
if [[ -n $pgbouncer_port ]]; then
  pooler_leak &
fi
# The two loops run until killed: if one of them stops, the demo is broken; say so and exit.
wait -n "${loops[@]}" || true
say "a workload loop stopped unexpectedly (see $DEMO_LOG_DIR); exiting" >&2
exit 1
