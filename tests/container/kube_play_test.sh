#!/usr/bin/env bash
# The sidecar overlay (packaging/kubernetes/overlays/sidecar) run, not only rendered: podman kube
# play runs its PostgreSQL pod (the PostgreSQL 15 test image and the exporter's image, the
# server's jsonlog on the volume the two share) with the overlay a user would write on top of it
# here: host networking on free ports of 127.0.0.1, the images built here, the test's passwords,
# a named lock. A session holds that lock and is terminated, another takes it: the exporter must
# report the loss with evidence "log" (the server's own word, read from the shared volume) and
# the takeover. Every runbook link of the PrometheusRule must answer on the played exporter, and
# with the server stopped the probes' endpoints must stay 200 while pglock_up turns 0.
# What podman 4.3 runs differently from Kubernetes is adapted by tests/container/podman_compat.py.
# podman kube play --down and the storage's removal end it, pass or fail.
# Usage: tests/container/kube_play_test.sh [BUILD_DIR]   (images as in container_test.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build_dir=$(cd "${1:-build}" && pwd)

fail() { echo "kube play test: FAIL: $*" >&2; exit 1; }
note() { echo "kube play test: $*"; }
if ((EUID != 0)); then
  note "SKIP: needs root (podman, mmdebstrap; CI runs as root)"
  exit 0
fi
command -v kubectl >/dev/null || fail "kubectl (with kustomize) is not installed"
# shellcheck source=scripts/lib/pg.sh
. scripts/lib/pg.sh
# shellcheck source=scripts/lib/bg.sh
. scripts/lib/bg.sh
# shellcheck source=tests/container/lib.sh
. tests/container/lib.sh

work=$(mktemp -d /tmp/pglock_kube_XXXXXX)
chmod 755 "$work"
played=
cleanup() {
  for p in "${bg_pids[@]}"; do stop_pid "$p"; done
  if [[ -n $played ]]; then
    podman kube play --down "$played" >/dev/null 2>&1 || true
  fi
  podman_cleanup
  rm -rf "$work"
}
trap cleanup EXIT

container_images "$build_dir" postgres || fail "building the images"
podman_setup "$work/podman"
podman load -q -i "$archive" >/dev/null || fail "podman load $archive"
podman load -q -i "$pg_archive" >/dev/null || fail "podman load $pg_archive"

# --- The user's overlay of the sidecar overlay --------------------------------------------------
pg_port=$(free_port)
port=$(free_port)
pg_password=$(openssl rand -hex 16)
exporter_password=$(openssl rand -hex 16)
k=$work/kube
mkdir -p "$k"
printf '%s\n' "$pg_password" >"$k/password"
printf 'host=127.0.0.1 port=%s dbname=postgres user=pglock_exporter password=%s\n' "$pg_port" \
  "$exporter_password" >"$k/main.dsn"
# The overlay's config, with the test's port, a fast poll and a named lock.
sed -e "s/^listen_address = .*/listen_address = \"127.0.0.1:$port\"/" \
  -e 's/^interval = .*/interval = "1s"/' -e 's/^timeout = .*/timeout = "900ms"/' \
  packaging/kubernetes/overlays/sidecar/config.toml >"$k/config.toml"
printf '\n  [[targets.locks]]\n  name = "nightly-report"\n  key = 4242\n' >>"$k/config.toml"
grep -q '^  path = "/var/log/postgresql"' "$k/config.toml" || fail "the overlay's config reads no log"
cat >"$k/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$k" "$root/packaging/kubernetes/overlays/sidecar")
images:
  - name: postgres
    newName: localhost/pglock-postgres
    newTag: "15"
  - name: localhost/pglock_exporter
    newTag: "$version"
patches:
  - target:
      kind: Deployment
      name: postgres
    patch: |-
      - op: add
        path: /spec/template/spec/hostNetwork
        value: true
      - op: test
        path: /spec/template/spec/containers/0/args/2
        value: listen_addresses=*
      - op: replace
        path: /spec/template/spec/containers/0/args/2
        value: listen_addresses=127.0.0.1
      - op: test
        path: /spec/template/spec/containers/0/args/4
        value: port=5432
      - op: replace
        path: /spec/template/spec/containers/0/args/4
        value: port=$pg_port
configMapGenerator:
  - name: pglock-exporter-config
    behavior: replace
    files:
      - config.toml
secretGenerator:
  - name: pglock-exporter-dsn
    behavior: replace
    files:
      - main.dsn
  - name: postgres-password
    behavior: replace
    files:
      - password
EOF
kubectl kustomize "$k" >"$work/rendered.yaml" || fail "kubectl kustomize of the test's overlay"
# The log volume as Kubernetes makes it for this pod: the server's group (fsGroup 999) may read.
install -d -o 999 -g 999 -m 2750 "$work/server-log"
python3 tests/container/podman_compat.py "$work/rendered.yaml" "$work/play.yaml" "$work/server-log"

# --- Play it ------------------------------------------------------------------------------------
t0=$SECONDS
played=$work/play.yaml
timeout 120 podman kube play "$played" >"$work/play.log" 2>&1 || { cat "$work/play.log"; fail "podman kube play"; }
pod=$(podman pod ps --format '{{.Name}}' | head -n 1)
note "played: pod $pod, containers: $(podman ps --format '{{.Names}}' | tr '\n' ' ')"

export PGPASSWORD=$pg_password
pg_find_bin 15
psql_pod() { "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U postgres -d postgres "$@"; }
ready=0
for _ in $(seq 150); do
  psql_pod -c 'SELECT 1' >/dev/null 2>&1 && { ready=1; break; }
  sleep 0.2
done
((ready)) || { podman logs "$pod-postgres" 2>&1 | tail -20; fail "PostgreSQL in the pod did not answer within 30 s"; }
psql_pod -c "CREATE ROLE pglock_exporter LOGIN PASSWORD '$exporter_password' IN ROLE pg_monitor"

url=http://127.0.0.1:$port
up=0
for _ in $(seq 150); do
  if curl -sf -o "$work/metrics" "$url/metrics" &&
    grep -q '^pglock_up{target="main"} 1' "$work/metrics" &&
    grep -q '^pglock_server_log_up{target="main"} 1' "$work/metrics"; then
    up=1; break
  fi
  sleep 0.2
done
((up)) || { podman logs "$pod-pglock-exporter" 2>&1 | tail -20; fail "no pglock_up 1 and pglock_server_log_up 1 within 30 s"; }
note "the exporter polls the server and reads its log ($((SECONDS - t0)) s after play)"
for path in /-/healthy /-/ready; do
  curl -sf -o /dev/null "$url$path" || fail "$path does not answer 200"
done
ls -ln "$work/server-log" | sed 's/^/kube play test: log volume: /'

# Every runbook link of the PrometheusRule, on this exporter as the instance Prometheus scraped.
mapfile -t runbooks < <(sed -n 's|.*runbook_url: "http://{{ $labels.instance }}\(/runbooks/[A-Za-z]*\)".*|\1|p' \
  packaging/kubernetes/base/prometheusrule.yaml | sort -u)
((${#runbooks[@]} > 0)) || fail "no runbook_url in the PrometheusRule"
for r in "${runbooks[@]}"; do
  curl -sf -o /dev/null "$url$r" || fail "runbook link $r does not answer on the exporter"
done
note "${#runbooks[@]} runbook links of the PrometheusRule answer 200"

# The pid of the session of application APP holding nightly-report's key (4242), waiting up to
# 10 s for it to take it; empty when it does not.
key_holder() {
  local pid=
  for _ in $(seq 100); do
    pid=$(psql_pod -c "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid)
      WHERE l.locktype = 'advisory' AND l.objid = 4242 AND l.granted AND a.application_name = '$1'")
    [[ -n $pid ]] && break
    sleep 0.1
  done
  echo "$pid"
}

# --- A named lock lost by termination and taken over --------------------------------------------
start_bg holder "$work/holder.log" env PGAPPNAME=holder "$PG_BIN/psql" -X -q -At -h 127.0.0.1 \
  -p "$pg_port" -U postgres -d postgres -c 'SELECT pg_advisory_lock(4242)' -c 'SELECT pg_sleep(120)'
holder=$(key_holder holder)
[[ -n $holder ]] || fail "the holder session did not take the lock"
# The exporter must have seen the hold before the loss: /api/v1/locks lists it.
seen=0
for _ in $(seq 50); do
  curl -sf "$url/api/v1/locks" | grep -q "\"pid\": *$holder\b" && { seen=1; break; }
  sleep 0.2
done
((seen)) || fail "the exporter never showed pid $holder holding the lock"
psql_pod -c "SELECT pg_terminate_backend($holder)" >/dev/null
start_bg taker "$work/taker.log" env PGAPPNAME=taker "$PG_BIN/psql" -X -q -At -h 127.0.0.1 \
  -p "$pg_port" -U postgres -d postgres -c 'SELECT pg_advisory_lock(4242)' -c 'SELECT pg_sleep(120)'
taker=$(key_holder taker)
[[ -n $taker ]] || fail "the second session did not take the lock"
note "pid $holder held nightly-report and was terminated; pid $taker took it"
python3 tests/container/wait_events.py "$url/api/v1/events" nightly-report "$holder" "$taker" 30 |
  sed 's/^/kube play test: /' || fail "the loss and takeover (see above)"

# --- A restart of the exporter without amnesia ---------------------------------------------------
# Its state volume (the PVC) holds the taker's hold and the takeover once a write after the
# takeover is done (every 5 s): the hold in the state file, the event in the events journal, and
# the state file written after the journal's append (it names the lines it covers). The hold can
# be written a poll before the event, which waits for the server's log. Then the exporter is
# stopped at once, the taker terminated and a third session takes the key while it is down.
# Started again, it judges the gap from its state and the log.
state_dir=$(podman volume inspect pglock-exporter-state --format '{{.Mountpoint}}') ||
  fail "no volume pglock-exporter-state for the PVC"
state=$state_dir/main.state.json
written=0
for _ in $(seq 100); do
  if [[ -s $state ]] && grep -q "\[[0-9]*,[0-9]*,[0-9]*,[0-9]*,$taker,true,true," "$state"; then
    journal=$(grep -l "\"kind\":\"lock_takeover\".*\"current\":\[$taker," "$state_dir"/main.events.*.jsonl 2>/dev/null | head -1 || true)
    [[ -n $journal && ! $journal -nt $state ]] && { written=1; break; }
  fi
  sleep 0.2
done
((written)) || { ls -ln "$state_dir"; podman logs "$pod-pglock-exporter" 2>&1 | tail -5; fail "no state with the taker's hold and its takeover in $state_dir within 20 s"; }
note "state volume: $(stat -c '%s bytes, owner %u' "$state"), the taker's hold in it"
podman stop -t 0 "$pod-pglock-exporter" >/dev/null || fail "podman stop of the exporter"
psql_pod -c "SELECT pg_terminate_backend($taker)" >/dev/null
start_bg third "$work/third.log" env PGAPPNAME=third "$PG_BIN/psql" -X -q -At -h 127.0.0.1 \
  -p "$pg_port" -U postgres -d postgres -c 'SELECT pg_advisory_lock(4242)' -c 'SELECT pg_sleep(120)'
third=$(key_holder third)
[[ -n $third ]] || fail "the third session did not take the lock"
podman start "$pod-pglock-exporter" >/dev/null || fail "podman start of the exporter"
note "exporter down while pid $taker was terminated and pid $third took nightly-report; started again"
python3 tests/container/wait_events.py "$url/api/v1/events" nightly-report "$taker" "$third" 60 across-gap |
  sed 's/^/kube play test: after the restart: /' || fail "the loss and takeover across the restart (see above)"
python3 tests/container/wait_events.py "$url/api/v1/events" nightly-report "$holder" "$taker" 5 >/dev/null ||
  fail "the events from before the restart are gone from /api/v1/events"

# The database down: the probes' endpoints stay 200 (the pod stays in rotation), pglock_up 0.
podman stop -t 10 "$pod-postgres" >/dev/null
down=0
for _ in $(seq 100); do
  if curl -sf -o "$work/metrics" "$url/metrics" && grep -q '^pglock_up{target="main"} 0' "$work/metrics"; then
    down=1; break
  fi
  sleep 0.2
done
((down)) || fail "no pglock_up 0 within 20 s of stopping PostgreSQL"
for path in /-/healthy /-/ready; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$url$path")
  [[ $code == 200 ]] || fail "$path answers $code while PostgreSQL is down"
done
note "PostgreSQL stopped: pglock_up 0, /-/healthy and /-/ready 200"

t1=$SECONDS
podman kube play --down "$played" >/dev/null 2>"$work/down.log" || { cat "$work/down.log"; fail "podman kube play --down"; }
played=
[[ -z $(podman ps -aq) ]] || fail "containers are left after kube play --down"
note "down in $((SECONDS - t1)) s; ok"
