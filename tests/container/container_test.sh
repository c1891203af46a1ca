#!/usr/bin/env bash
# The image (packaging/container/build.sh) in a real container runtime: podman as root, with this
# machine's facts in the test's own config files (tests/container/lib.sh). The container runs
# against a throwaway PostgreSQL on 127.0.0.1 as a user 65532 with no capability, a read-only
# root, the config from a mounted file and the password from a mounted secret file (dsn_file):
# /metrics passes promtool check metrics, /locks answers, the password shows nowhere, SIGTERM ends
# it within 5 s, and a bad config exits 2 naming the file, line and key in the container's log.
# Everything it made (containers, images, storage, the server) is gone at its end, pass or fail.
# Usage: tests/container/container_test.sh [BUILD_DIR]   (default: build; the image is built into
# $PGLOCK_IMAGE_DIR, default BUILD_DIR/container, unless an archive newer than the binary is there)
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=$(cd "${1:-build}" && pwd)
uid=65532

fail() { echo "container test: FAIL: $*" >&2; exit 1; }
note() { echo "container test: $*"; }
if ((EUID != 0)); then
  note "SKIP: needs root (podman, mmdebstrap; CI runs as root)"
  exit 0
fi
# shellcheck source=scripts/lib/pg.sh
. scripts/lib/pg.sh
# shellcheck source=tests/container/lib.sh
. tests/container/lib.sh

work=$(mktemp -d /tmp/pglock_container_XXXXXX)
chmod 755 "$work"
cleanup() {
  podman_cleanup
  pg_stop immediate
  rm -rf "$work"
}
trap cleanup EXIT

container_images "$build_dir" || fail "building the image"
podman_setup "$work/podman"
podman load -q -i "$archive" >/dev/null || fail "podman load $archive"
note "loaded $image ($(podman image inspect --format '{{.Size}}' "$image") bytes)"

pg_find_bin 15
pg_init "$work/pg" "$work" --auth-local=trust --auth-host=scram-sha-256 || fail "initdb"
pg_start || { cat "$work/pg_ctl.log"; fail "PostgreSQL did not start"; }
password=$(openssl rand -hex 16)
pg_psql -d postgres -c "CREATE ROLE pglock_exporter LOGIN PASSWORD '$password' IN ROLE pg_monitor"

# The config and the secret as Kubernetes mounts them: root's files, the secret readable by the
# exporter's group only.
port=$(free_port)
mkdir -p "$work/etc" "$work/secret"
printf '[web]\nlisten_address = "127.0.0.1:%s"\n[[targets]]\nname = "main"\ndsn_file = "%s"\n' \
  "$port" /etc/pglock_exporter/secret/main.dsn >"$work/etc/config.toml"
printf 'host=127.0.0.1 port=%s dbname=postgres user=pglock_exporter password=%s\n' "$PG_PORT" \
  "$password" >"$work/secret/main.dsn"
chgrp -R "$uid" "$work/secret"
chmod 0750 "$work/secret"
chmod 0440 "$work/secret/main.dsn"
run_opts=(--read-only --user "$uid:$uid" --cap-drop=ALL --security-opt=no-new-privileges
  -v "$work/etc/config.toml:/etc/pglock_exporter/config.toml:ro"
  -v "$work/secret:/etc/pglock_exporter/secret:ro")

podman run -d --name exporter "${run_opts[@]}" "$image" >/dev/null || fail "podman run"
url=http://127.0.0.1:$port
up=0
for _ in $(seq 100); do
  if curl -sf -o "$work/metrics" "$url/metrics" && grep -q '^pglock_up{target="main"} 1' "$work/metrics"; then
    up=1; break
  fi
  sleep 0.2
done
((up)) || { podman logs exporter; fail "no pglock_up 1 within 20 s"; }
pid=$(podman inspect --format '{{.State.Pid}}' exporter)
read -r _ ruid _ < <(grep '^Uid:' "/proc/$pid/status")
[[ $ruid == "$uid" ]] || fail "the exporter runs as uid $ruid"
grep -q '^CapEff:[[:space:]]*0*$' "/proc/$pid/status" || fail "the exporter has capabilities"
[[ $(podman inspect --format '{{.HostConfig.ReadonlyRootfs}}' exporter) == true ]] ||
  fail "the root filesystem is writable"
note "running as uid $ruid, no capabilities, read-only root; pglock_up 1"

# What the resources in packaging/kubernetes rest on, at this small load (docs/kubernetes.md).
read -r _ _ _ _ _ _ _ _ _ _ _ utime stime _ < <(cut -d')' -f2- "/proc/$pid/stat")
note "resident $(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status") kB (peak $(awk '/^VmHWM/ { print $2 }' \
  "/proc/$pid/status") kB), CPU $(((utime + stime) * 1000 / $(getconf CLK_TCK))) ms since start"
promtool check metrics <"$work/metrics" || fail "promtool check metrics"
note "promtool check metrics: ok ($(grep -vc '^#' "$work/metrics") samples)"
code=$(curl -s -o "$work/locks.html" -w '%{http_code}' "$url/locks")
if [[ $code != 200 ]] || ! grep -qi '<html' "$work/locks.html"; then fail "/locks answered $code"; fi
note "/locks: 200"
podman logs exporter >"$work/exporter.log" 2>&1
! grep -q "$password" "$work/metrics" "$work/locks.html" "$work/exporter.log" ||
  fail "the password shows in /metrics, /locks or the log"

# SIGTERM to the container's first process, as `podman stop` sends it, timed from the signal to
# that process's exit: `podman stop`'s own work (its start, the cleanup of the container's
# storage and cgroup) took from 1.2 s to over 5 s as a whole on a loaded machine, and is not the
# exporter's. An exit status of 0 says that the exporter ended on the signal, not on a kill.
t0=$(date +%s%N)
kill -TERM "$pid"
while [[ -e /proc/$pid ]] && (($(date +%s%N) - t0 < 10000000000)); do sleep 0.02; done
ms=$((($(date +%s%N) - t0) / 1000000))
podman stop -t 10 exporter >/dev/null
rc=$(podman inspect --format '{{.State.ExitCode}}' exporter)
note "SIGTERM: the exporter ended $ms ms after the signal, exit $rc"
((ms < 5000)) || fail "the exporter ended $ms ms after SIGTERM (limit 5000)"
[[ $rc == 0 ]] || fail "exit $rc after SIGTERM"

# Line 6 holds a key no table has.
printf '[web]\nlisten_address = "127.0.0.1:%s"\n[[targets]]\nname = "main"\ndsn = "host=127.0.0.1"\ncolour = "blue"\n' \
  "$port" >"$work/etc/config.toml"
rc=0
podman run --name bad "${run_opts[@]}" "$image" >/dev/null 2>&1 || rc=$?
podman logs bad >"$work/bad.log" 2>&1
note "bad config: exit $rc: $(grep -m1 colour "$work/bad.log" || true)"
[[ $rc == 2 ]] || { cat "$work/bad.log"; fail "a bad config exited $rc, not 2"; }
grep -q '/etc/pglock_exporter/config.toml:6: targets.colour' "$work/bad.log" ||
  { cat "$work/bad.log"; fail "the log does not name the file, line and key"; }
note "ok"
