#!/usr/bin/env bash
# Builds the .deb from a build directory (cpack), checks its contents and lintian, installs it
# with dpkg -i, runs the INSTALLED binary as its system user with the installed config and
# /etc/default file against a throwaway PostgreSQL (plain HTTP and TLS, the latter without
# libssl-dev's libssl.so/libcrypto.so), checks the unit with systemd-analyze, reinstalls it as an
# upgrade, and purges it, checking that nothing is left. Needs root (dpkg); CI runs it as root.
# Usage: tests/package/package_test.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=$(cd "${1:-build}" && pwd)
pkg=pglock-exporter
user=pglock_exporter

fail() { echo "package test: FAIL: $*" >&2; exit 1; }
note() { echo "package test: $*"; }

if [[ $(id -u) -ne 0 ]]; then
  note "SKIP: needs root to install a package (CI runs as root)"
  exit 0
fi
if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q installed; then
  fail "$pkg is already installed on this machine; not touching it"
fi

work=$(mktemp -d /tmp/pglock_pkg_XXXXXX)
chmod 755 "$work"
exporter_pids=()
# Stops the exporters this script started (runuser passes SIGTERM on) and waits for them: the
# purge cannot remove a user that still runs a process.
stop_exporters() {
  for p in "${exporter_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${exporter_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  exporter_pids=()
}
cleanup() {
  stop_exporters
  stop_test_postgres
  if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok "; then
    dpkg --purge "$pkg" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# --- A throwaway PostgreSQL (the only part that knows how to start one) -----------------------
# Sets PG_SOCKDIR and PG_PORT. Local connections use peer authentication, as Debian's do, so the
# system user pglock_exporter logs in as the role of the same name.
PG_DATA=
start_test_postgres() {
  local bindir=${PGLOCK_PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
  PG_DATA=$work/pg
  PG_SOCKDIR=$work/pgsock
  PG_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$PG_DATA" "$PG_SOCKDIR"
  chown postgres: "$PG_DATA" "$PG_SOCKDIR"
  runuser -u postgres -- "$bindir/initdb" -D "$PG_DATA" -U postgres --auth-local=peer \
    --auth-host=reject >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log"; fail "initdb"; }
  runuser -u postgres -- "$bindir/pg_ctl" -D "$PG_DATA" -l "$PG_SOCKDIR/server.log" -w -o \
    "-p $PG_PORT -k $PG_SOCKDIR -c listen_addresses=''" start >/dev/null ||
    { cat "$PG_SOCKDIR/server.log"; fail "pg_ctl start"; }
  PG_BINDIR=$bindir
}
stop_test_postgres() {
  [[ -n $PG_DATA && -f $PG_DATA/postmaster.pid ]] || return 0
  runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D "$PG_DATA" -m immediate stop >/dev/null 2>&1 || true
}
psql_postgres() {
  runuser -u postgres -- "$PG_BINDIR/psql" -h "$PG_SOCKDIR" -p "$PG_PORT" -U postgres -qAtX \
    -v ON_ERROR_STOP=1 -c "$1"
}

# --- Build and inspect the package ----------------------------------------------------------
note "cpack -G DEB"
(cd "$work" && cpack -G DEB --config "$build_dir/CPackConfig.cmake" -B "$work/out" >cpack.log 2>&1) ||
  { cat "$work/cpack.log"; fail "cpack"; }
deb=$(ls "$work"/out/*.deb)
note "built $(basename "$deb")"
dpkg-deb -c "$deb" | awk '{print $1, $6}' | sed 's|^\(.\{10\}\) \./|\1 /|' >"$work/contents"
for f in /usr/bin/pglock_exporter /usr/lib/pglock_exporter/libpglock_ssl_compat.so \
  /usr/lib/pglock_exporter/libpglock_crypto_compat.so /etc/pglock_exporter/config.toml \
  /etc/default/pglock_exporter /lib/systemd/system/pglock_exporter.service \
  /usr/share/pglock_exporter/alerts/pglock.rules.yml \
  /usr/share/pglock_exporter/alerts/pglock.replicas.rules.yml \
  /usr/share/pglock_exporter/alerts/tests/pglock.rules.test.yml \
  /usr/share/pglock_exporter/alerts/runbooks/PglockTargetDown.md \
  /usr/share/pglock_exporter/dashboards/pglock-overview.json \
  /usr/share/pglock_exporter/dashboards/provisioning/pglock.yaml \
  /usr/share/doc/pglock-exporter/copyright /usr/share/doc/pglock-exporter/changelog.gz; do
  grep -q " $f\$" "$work/contents" || fail "$f is not in the package"
done
dpkg-deb -f "$deb" Depends | tee "$work/depends" | sed 's/^/package test: Depends: /'
for d in adduser libpq5 libcivetweb1 libprometheus-cpp-pull libssl3 zlib1g libc6; do
  grep -q "$d" "$work/depends" || fail "Depends lacks $d (dpkg-shlibdeps)"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles >"$work/conffiles"
grep -qx /etc/pglock_exporter/config.toml "$work/conffiles" || fail "config.toml is no conffile"
grep -qx /etc/default/pglock_exporter "$work/conffiles" || fail "the /etc/default file is no conffile"

if command -v lintian >/dev/null; then
  note "lintian"
  # As an unprivileged user, as lintian recommends; info tags are shown, errors and warnings fail.
  runuser -u nobody -- env HOME="$work" lintian --fail-on error,warning --display-info "$deb" ||
    fail "lintian (see above)"
else
  fail "lintian is not installed (scripts/install-deps.sh test installs it)"
fi

# --- Install --------------------------------------------------------------------------------
note "dpkg -i"
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }
IFS=: read -r _ _ uid _ _ home shell < <(getent passwd "$user") || fail "no user $user"
((uid < 1000)) || fail "$user is not a system user (uid $uid)"
[[ $shell == /usr/sbin/nologin ]] || fail "$user has the login shell $shell"
[[ ! -e $home ]] || fail "$user has a home directory $home"
getent group "$user" >/dev/null || fail "no group $user"
[[ -L /etc/systemd/system/multi-user.target.wants/pglock_exporter.service ]] ||
  fail "the unit is not enabled"
runuser -u "$user" -- /usr/bin/pglock_exporter --check-config \
  --config.file=/etc/pglock_exporter/config.toml || fail "the installed config does not check"

if command -v systemd-analyze >/dev/null; then
  note "systemd-analyze verify"
  systemd-analyze verify /lib/systemd/system/pglock_exporter.service 2>&1 | tee "$work/verify"
  [[ ! -s $work/verify ]] || fail "systemd-analyze verify complained"
  systemd-analyze security --offline=true /lib/systemd/system/pglock_exporter.service 2>/dev/null |
    tail -1 | sed 's/^/package test: /' || true
else
  note "systemd-analyze not installed: unit not verified"
fi
# The installed alerts are the files alerts/check.sh checks and tests with promtool (in the same
# test run; 25 s of CPU a pass of the rules' tests): byte for byte.
for f in pglock.rules.yml pglock.replicas.rules.yml tests/pglock.rules.test.yml \
  tests/pglock.replicas.test.yml; do
  cmp -s "alerts/$f" "/usr/share/pglock_exporter/alerts/$f" ||
    fail "the installed alerts/$f differs from the source's (which alerts/check.sh tests)"
done

# --- Run the installed binary as the service would --------------------------------------------
start_test_postgres
psql_postgres "CREATE ROLE $user LOGIN IN ROLE pg_monitor"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Waits for $1 (a URL) to answer 200 with curl arguments $2...
wait_http() {
  local url=$1; shift
  for _ in $(seq 50); do
    curl -sf -o /dev/null "$@" "$url" && return 0
    sleep 0.2
  done
  return 1
}
port=$(free_port)
# ARGS from the installed /etc/default file, as the unit's EnvironmentFile passes them; the
# socket of the test server replaces the example's /var/run/postgresql.
ARGS=$(. /etc/default/pglock_exporter && echo "$ARGS")
# shellcheck disable=SC2086 # ARGS is split into flags, as systemd does
runuser -u "$user" -- /usr/bin/pglock_exporter $ARGS --web.listen-address="127.0.0.1:$port" \
  --postgres.dsn="host=$PG_SOCKDIR port=$PG_PORT dbname=postgres user=$user" \
  >"$work/exporter.log" 2>&1 &
exporter_pids+=($!)
ok=0
for _ in $(seq 50); do
  # To a file, not into grep -q: grep stops at the first match and curl, writing the rest into a
  # closed pipe, fails the pipeline under pipefail.
  if curl -sf -o "$work/metrics" "http://127.0.0.1:$port/metrics" 2>/dev/null &&
    grep -q '^pglock_up{target="main"} 1' "$work/metrics"; then
    ok=1; break
  fi
  sleep 0.2
done
((ok)) || { cat "$work/exporter.log"; fail "the installed exporter never reported pglock_up 1"; }
curl -sf --compressed -D "$work/headers" -o "$work/metrics.gz-decoded" "http://127.0.0.1:$port/metrics" &&
  grep -q '^pglock_up' "$work/metrics.gz-decoded" || fail "no metrics through gzip"
grep -qi '^Content-Encoding: gzip' "$work/headers" || fail "no gzip from the installed exporter"
note "installed exporter: pglock_up 1 (plain and gzip)"
for _ in $(seq 50); do [[ -s /var/lib/pglock_exporter/main.state.json ]] && break; sleep 0.2; done
[[ -s /var/lib/pglock_exporter/main.state.json ]] ||
  fail "the installed exporter kept no state in /var/lib/pglock_exporter"
[[ $(stat -c %U /var/lib/pglock_exporter/main.state.json) == "$user" ]] ||
  fail "the state file is not the service user's"
note "installed exporter: its state in /var/lib/pglock_exporter/main.state.json"

# TLS with the installed shims, on a system without libssl-dev's unversioned libssl.so and
# libcrypto.so (hidden in a private mount namespace): what a server with only the package has.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
  -keyout "$work/tls.key" -out "$work/tls.crt" >/dev/null 2>&1
chown "$user" "$work/tls.key"
tls_port=$(free_port)
printf '[web]\ntls_cert_file = "%s"\ntls_key_file = "%s"\n[[targets]]\nname = "main"\ndsn = "%s"\n' \
  "$work/tls.crt" "$work/tls.key" "host=$PG_SOCKDIR port=$PG_PORT dbname=postgres user=$user" \
  >"$work/tls.toml"
chmod 644 "$work/tls.toml"
libdir=$(readlink -f "/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)")
# In a private mount namespace, an overlay whose whiteouts hide the two unversioned names.
hide_ssl_dev_links="mount -t tmpfs tmpfs $work/ovl && mkdir $work/ovl/up $work/ovl/wk &&
  mknod $work/ovl/up/libssl.so c 0 0 && mknod $work/ovl/up/libcrypto.so c 0 0 &&
  mount -t overlay overlay -o lowerdir=$libdir,upperdir=$work/ovl/up,workdir=$work/ovl/wk $libdir"
mkdir "$work/ovl"
if unshare -m sh -c "$hide_ssl_dev_links && ! [ -e $libdir/libcrypto.so ]" 2>/dev/null; then
  unshare -m sh -c "$hide_ssl_dev_links && exec runuser -u $user -- /usr/bin/pglock_exporter \
    --config.file=$work/tls.toml --web.listen-address=127.0.0.1:$tls_port" \
    >"$work/tls.log" 2>&1 &
  exporter_pids+=($!)
  wait_http "https://127.0.0.1:$tls_port/metrics" --cacert "$work/tls.crt" ||
    { cat "$work/tls.log"; fail "TLS with the installed shims"; }
  note "installed exporter: TLS works without libssl-dev's libssl.so/libcrypto.so"
else
  note "no mount namespace or overlay here: TLS without libssl-dev not checked"
fi
stop_exporters

# --- Upgrade (reinstall) keeps an edited config; purge leaves nothing --------------------------
echo "# edited by the package test" >>/etc/pglock_exporter/config.toml
dpkg -i "$deb" >"$work/dpkg2.log" 2>&1 || { cat "$work/dpkg2.log"; fail "reinstall"; }
grep -q "edited by the package test" /etc/pglock_exporter/config.toml ||
  fail "reinstalling replaced the edited config"
getent passwd "$user" >/dev/null || fail "reinstalling lost the user"

note "dpkg --purge"
dpkg --purge "$pkg" >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "dpkg --purge"; }
for f in /usr/bin/pglock_exporter /usr/lib/pglock_exporter /etc/pglock_exporter \
  /etc/default/pglock_exporter /lib/systemd/system/pglock_exporter.service \
  /etc/systemd/system/pglock_exporter.service \
  /etc/systemd/system/multi-user.target.wants/pglock_exporter.service /usr/share/pglock_exporter \
  /usr/share/doc/pglock-exporter /var/lib/systemd/deb-systemd-helper-enabled/pglock_exporter.service.dsh-also \
  /var/lib/systemd/deb-systemd-helper-masked/pglock_exporter.service /var/lib/pglock_exporter; do
  [[ ! -e $f && ! -L $f ]] || fail "$f is left after purge"
done
! getent passwd "$user" >/dev/null || fail "user $user is left after purge"
! getent group "$user" >/dev/null || fail "group $user is left after purge"
note "ok"
