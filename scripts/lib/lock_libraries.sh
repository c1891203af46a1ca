#!/usr/bin/env bash
# The real lock libraries the integration tests hold locks with (tests/integration/npm/holder.js)
# and the migration tools they run behind the preflight gate (tests/integration/npm/migrate.js),
# at exact versions from the npm registry, installed once into a cache outside the repository and
# kept there. Prints the node_modules directory to put in NODE_PATH.
# Cache: $PGLOCK_NPM_CACHE, else /var/cache/pglock_exporter/npm as root, else
# ${XDG_CACHE_HOME:-~/.cache}/pglock_exporter/npm.
set -euo pipefail

# Exact versions, so that a run tests what the docs say it tests.
packages=(advisory-lock@2.0.0 knex@3.3.0 node-pg-migrate@9.0.0 pg@8.16.3)

if [[ -n ${PGLOCK_NPM_CACHE:-} ]]; then
  cache=$PGLOCK_NPM_CACHE
elif ((EUID == 0)); then
  cache=/var/cache/pglock_exporter/npm
else
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/pglock_exporter/npm
fi
dir=$cache/lock-libraries-$(printf '%s\n' "${packages[@]}" | sha1sum | cut -c1-12)
if [[ ! -d $dir/node_modules ]]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d "$dir.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm init -y >/dev/null &&
    npm install --silent --no-audit --no-fund "${packages[@]}" >&2)
  mv "$tmp" "$dir"  # atomic: a cached directory is always complete
  trap - EXIT
fi
echo "$dir/node_modules"
