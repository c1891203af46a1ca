# shellcheck shell=bash disable=SC2034  # PGB_* are set for the caller
# A throwaway PgBouncer in front of the throwaway PostgreSQL (scripts/lib/pg.sh, sourced first), for
# scripts/demo.sh and tests/e2e/alerts_live.sh; the shell twin of tests/support/pgbouncer.cc.
#
#   pgb_start DIR LOGFILE PG_PORT DATABASE POOL_SIZE USERLIST STATS_USER
#                 picks PGB_PORT and starts PgBouncer on 127.0.0.1:PGB_PORT in transaction pooling
#                 mode, serving DATABASE of the server on 127.0.0.1:PG_PORT with POOL_SIZE server
#                 connections per pool. USERLIST is the text of its auth_file ("user" "password"
#                 lines, scram-sha-256 logins); STATS_USER may read SHOW POOLS / SHOW SERVERS on its
#                 admin console (database pgbouncer). Config and pid file in DIR. Returns 1 with the
#                 log's last lines on stderr when it did not start.
#   pgb_stop      stops it (nothing when it was not started)

PGB_DIR=
PGB_PORT=

pgb_start() {
  local dir=$1 logfile=$2 pg_port=$3 database=$4 pool_size=$5 userlist=$6 stats_user=$7 bin i
  bin=$(PATH=$PATH:/usr/sbin:/sbin command -v pgbouncer) || {
    echo "pgbouncer not found (Debian package pgbouncer)" >&2
    return 1
  }
  PGB_DIR=$dir
  PGB_PORT=$(free_port)
  mkdir -p "$dir"
  printf '%s\n' "$userlist" >"$dir/userlist.txt"
  cat >"$dir/pgbouncer.ini" <<INI
[databases]
$database = host=127.0.0.1 port=$pg_port dbname=$database

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PGB_PORT
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = $pool_size
max_client_conn = 100
stats_users = $stats_user
server_idle_timeout = 0
server_lifetime = 86400
ignore_startup_parameters = extra_float_digits
; the exporter logs in to the admin console on every poll
log_connections = 0
log_disconnections = 0
logfile = $logfile
pidfile = $dir/pgbouncer.pid
INI
  chmod 600 "$dir/userlist.txt" "$dir/pgbouncer.ini"
  if ((EUID == 0)); then chown postgres: "$dir" "$dir"/*; fi
  : >"$logfile"
  if ((EUID == 0)); then chown postgres: "$logfile"; fi
  (cd "$dir" && as_postgres "$bin" -d -q "$dir/pgbouncer.ini") || {
    tail -n 20 "$logfile" >&2
    return 1
  }
  for ((i = 0; i < 50; i++)); do
    "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PGB_PORT" -d pgbouncer && return 0
    sleep 0.1
  done
  echo "PgBouncer does not answer on 127.0.0.1:$PGB_PORT" >&2
  tail -n 20 "$logfile" >&2
  return 1
}

pgb_stop() {
  [[ -n $PGB_DIR && -f $PGB_DIR/pgbouncer.pid ]] || return 0
  kill -TERM "$(cat "$PGB_DIR/pgbouncer.pid")" 2>/dev/null
  local i
  for ((i = 0; i < 20; i++)); do
    [[ -f $PGB_DIR/pgbouncer.pid ]] || return 0
    sleep 0.1
  done
}
