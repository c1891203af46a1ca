#!/bin/sh
# Entry point of the PostgreSQL 15 test image (tests/container/postgres_image.sh), with the
# interface of the postgres images users run: `postgres ARG...` initialises $PGDATA on the first
# start (superuser postgres, password from $POSTGRES_PASSWORD_FILE, scram-sha-256 over TCP) and
# then runs the server with ARG...; any other command runs as given.
set -eu
bin=/usr/lib/postgresql/15/bin
if [ "${1:-}" != postgres ]; then exec "$@"; fi
shift
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  "$bin/initdb" -D "$PGDATA" -U postgres --pwfile="$POSTGRES_PASSWORD_FILE" -E UTF8 --locale=C \
    --auth-local=trust --auth-host=scram-sha-256 --no-sync >/dev/null
fi
exec "$bin/postgres" -D "$PGDATA" "$@"
