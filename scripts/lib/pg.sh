# shellcheck shell=bash disable=SC2034  # PG_* are set for the caller
# The throwaway PostgreSQL of scripts/demo.sh, tests/bench/run.sh and tests/e2e/alerts_live.sh, the
# shell twin of tests/support/test_postgres.cc: finds the server binaries, picks free ports, and
# runs initdb, the server, psql and the final stop in a temporary directory. PostgreSQL refuses to
# run as root: when the caller is root, it runs as the `postgres` system user.
#
#   pg_find_bin [MAJOR]           sets PG_BIN and PG_VERSION: $PGLOCK_PG_BINDIR if set, else
#                                 /usr/lib/postgresql/MAJOR/bin, else the newest
#                                 /usr/lib/postgresql/*/bin with an initdb. On failure says why
#                                 on stderr and returns 1.
#   free_port [HOST [PREFERRED]]  prints a port free on HOST (default 127.0.0.1): PREFERRED if it
#                                 is, else one the kernel picks
#   as_postgres COMMAND...        runs COMMAND as postgres when root, else as the caller
#   pg_init DIR LOGDIR INITDB_OPTION...
#                                 picks PG_PORT and runs initdb into DIR/pgdata (PG_DATA), with
#                                 sockets in DIR/pgsocket (PG_SOCKET); makes DIR postgres's when
#                                 root. Output in LOGDIR/initdb.log.
#   pg_start [CONF_LINE...]       starts the server on 127.0.0.1:PG_PORT, without durability, with
#                                 the given postgresql.conf lines. Server log in PG_DATA/postgres.log,
#                                 linked from LOGDIR/postgres.log; pg_ctl's output in LOGDIR/pg_ctl.log.
#   pg_psql PSQL_ARG...           psql as the superuser over the socket, stopping at the first error
#   pg_stop fast|immediate        stops the server if it runs, SIGKILL if pg_ctl cannot. pg_init
#                                 registers the data directory: the caller's EXIT trap calls pg_stop
#                                 at any point, before pg_init and after a failed start included.
#
# Settings go to postgresql.conf, not to `-c` options: a server stopped by hand restarts with a
# plain `pg_ctl -D DIR/pgdata start` on the same port and socket (scripts/demo/README.md).

pg_lib_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
PG_BIN='' PG_VERSION='' PG_DATA='' PG_SOCKET='' PG_PORT='' pg_logs=''

# shellcheck disable=SC2120  # MAJOR is optional
pg_find_bin() {
  local dir tool
  if [[ -n ${PGLOCK_PG_BINDIR:-} ]]; then
    dir=$PGLOCK_PG_BINDIR
  elif [[ -n ${1:-} ]]; then
    dir=/usr/lib/postgresql/$1/bin
  else
    dir=$(printf '%s\n' /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)
    dir=${dir%/initdb}
  fi
  for tool in initdb pg_ctl psql; do
    if [[ ! -x $dir/$tool ]]; then
      printf '%s: %s%s has no %s: set PGLOCK_PG_BINDIR to the bin directory of a PostgreSQL server,' \
        "${0##*/}" "${PGLOCK_PG_BINDIR:+PGLOCK_PG_BINDIR=}" "$dir" "$tool" >&2
      printf ' or install postgresql-15 (scripts/install-deps.sh)\n' >&2
      return 1
    fi
  done
  PG_BIN=$dir
  # "initdb (PostgreSQL) 15.8 (Debian 15.8-0+deb12u1)"
  read -r _ _ PG_VERSION _ < <("$PG_BIN/initdb" --version)
}

free_port() {
  python3 "$pg_lib_dir/free_port.py" "${1:-127.0.0.1}" ${2:+"$2"}
}

as_postgres() {
  if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_init() {
  local dir=$1
  pg_logs=$2
  shift 2
  PG_PORT=$(free_port 127.0.0.1) || return
  PG_SOCKET=$dir/pgsocket
  mkdir -p "$PG_SOCKET"
  if ((EUID == 0)); then chown postgres: "$dir" "$PG_SOCKET"; fi
  PG_DATA=$dir/pgdata
  # From DIR: postgres may not be allowed into the caller's working directory.
  (cd "$dir" && as_postgres "$PG_BIN/initdb" -D "$PG_DATA" -U postgres -E UTF8 --locale=C --no-sync \
    "$@" >"$pg_logs/initdb.log" 2>&1)
}

pg_start() {
  {
    printf '\n# scripts/lib/pg.sh for %s\n' "${0##*/}"
    printf '%s\n' "port = $PG_PORT" "listen_addresses = '127.0.0.1'" \
      "unix_socket_directories = '$PG_SOCKET'" "fsync = off" "synchronous_commit = off" \
      "full_page_writes = off" "$@"
  } >>"$PG_DATA/postgresql.conf"
  ln -sf "$PG_DATA/postgres.log" "$pg_logs/postgres.log"
  (cd "${PG_DATA%/*}" && as_postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_DATA/postgres.log" -w -t 60 \
    start >"$pg_logs/pg_ctl.log" 2>&1)
}

pg_psql() {
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCKET" -p "$PG_PORT" -U postgres "$@"
}

pg_stop() {
  [[ -n $PG_DATA && -f $PG_DATA/postmaster.pid ]] || return 0
  (cd "${PG_DATA%/*}" && as_postgres "$PG_BIN/pg_ctl" -D "$PG_DATA" -m "$1" -w -t 30 stop >/dev/null 2>&1) ||
    kill -KILL "$(head -n 1 "$PG_DATA/postmaster.pid")" 2>/dev/null
}
