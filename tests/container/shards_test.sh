#!/usr/bin/env bash
# The shards overlay (packaging/kubernetes/overlays/shards) run, not only rendered: its
# StatefulSet's pods under podman with one ConfigMap of 12 targets, 12 real PostgreSQL servers
# started here. podman 4.3's kube play runs no StatefulSet, so this test does what the
# StatefulSet controller would: it plays `replicas` Pods named <statefulset>-0, -1, ... from the
# pod template (tests/container/podman_compat.py --statefulset-ordinal, which adapts what else
# podman 4.3 runs differently), each with its own state volume, each reading its shard from its
# host name (--shard.ordinal=auto). On top of the overlay, the one a user would write: host
# networking on free ports of 127.0.0.1, the image built here, the servers' DSNs.
# It asserts that every target is polled by exactly one pod, the one every pod names for it in
# pglock_target_shard_info; that a lost pod's targets are polled by nobody (the others do not take
# them: PglockShardTargetsUnpolled is for that) and that the pod played again polls the same
# targets as before. It prints the assignment per pod before, during and after the loss.
# Pods, podman's storage, the servers and the temporary directory go at exit, pass or fail.
# Usage: tests/container/shards_test.sh [BUILD_DIR]   (images as in container_test.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build_dir=$(cd "${1:-build}" && pwd)

fail() { echo "shards test: FAIL: $*" >&2; exit 1; }
note() { echo "shards test: $*"; }
if ((EUID != 0)); then
  note "SKIP: needs root (podman, mmdebstrap; CI runs as root)"
  exit 0
fi
command -v kubectl >/dev/null || fail "kubectl (with kustomize) is not installed"
# shellcheck source=scripts/lib/pg.sh
. scripts/lib/pg.sh
# shellcheck source=tests/container/lib.sh
. tests/container/lib.sh

readonly servers=12
work=$(mktemp -d /tmp/pglock_shards_XXXXXX)
# The servers run as postgres, which must reach their directories below this one.
chmod 755 "$work"
server_dirs=()
cleanup() {
  podman_cleanup
  local dir
  for dir in "${server_dirs[@]}"; do
    (PG_DATA=$dir/pgdata && pg_stop immediate) &
  done
  wait
  rm -rf "$work"
}
trap cleanup EXIT
t_start=$SECONDS

container_images "$build_dir" || fail "building the image"
podman_setup "$work/podman"
podman load -q -i "$archive" >/dev/null || fail "podman load $archive"

# --- 12 PostgreSQL servers ------------------------------------------------------------------------
# One initdb with the exporter's role, copied: 12 initdb runs would take most of the test's time.
# Each copy is started on its own port, all at once.
pg_find_bin 15
password=$(openssl rand -hex 16)
template=$work/pg/template
mkdir -p "$template" "$work/pg/template-logs"
server_dirs+=("$template")
pg_init "$template" "$work/pg/template-logs" --auth-local=trust --auth-host=scram-sha-256 ||
  fail "initdb (log in $work/pg/template-logs)"
pg_start "shared_buffers = 16MB" "max_connections = 20" ||
  { cat "$work/pg/template-logs/pg_ctl.log"; fail "the template server did not start"; }
pg_psql -d postgres -c "CREATE ROLE pglock_exporter LOGIN PASSWORD '$password' IN ROLE pg_monitor"
pg_stop fast

# start_server DIR: starts the copy in DIR on a free port, written to DIR/port. The copies pick
# their ports at the same time: one that finds its port taken by another starts on a new one.
# (pg.sh keeps one server's settings in its globals: each copy starts in a subshell of its own.)
start_server() {
  PG_DATA=$1/pgdata PG_SOCKET=$1/pgsocket pg_logs=$1
  for _ in 1 2 3; do
    PG_PORT=$(free_port) || return
    if pg_start; then
      echo "$PG_PORT" >"$1/port"
      return 0
    fi
  done
  return 1
}
targets=()
start_pids=()
for i in $(seq -f '%02g' 1 "$servers"); do
  targets+=("pg-$i")
  server_dirs+=("$work/pg/pg-$i")
  (cp -a "$template" "$work/pg/pg-$i" && start_server "$work/pg/pg-$i") &
  start_pids+=("$!")
done
declare -A target_port=()
for i in "${!start_pids[@]}"; do
  t=${targets[$i]}
  wait "${start_pids[$i]}" || { cat "$work/pg/$t/pg_ctl.log"; fail "$t did not start"; }
  target_port[$t]=$(<"$work/pg/$t/port")
done
note "$servers PostgreSQL $PG_VERSION servers on 127.0.0.1 ($((SECONDS - t_start)) s since start)"

# --- The user's overlay of the shards overlay ------------------------------------------------------
k=$work/kube
mkdir -p "$k"
# The overlay's config with a fast poll, its example targets replaced by the 12 servers.
sed -e '/^\[\[targets\]\]/,$d' -e 's/^interval = .*/interval = "1s"/' \
  -e 's/^timeout = .*/timeout = "900ms"/' packaging/kubernetes/overlays/shards/config.toml \
  >"$k/config.toml"
grep -q '^interval = "1s"' "$k/config.toml" || fail "the overlay's config has no [poll] interval"
dsn_files=()
for t in "${targets[@]}"; do
  printf '[[targets]]\nname = "%s"\ndsn_file = "/etc/pglock_exporter/secret/%s.dsn"\n\n' "$t" "$t" \
    >>"$k/config.toml"
  printf 'host=127.0.0.1 port=%s dbname=postgres user=pglock_exporter password=%s\n' \
    "${target_port[$t]}" "$password" >"$k/$t.dsn"
  dsn_files+=("      - $t.dsn")
done
cat >"$k/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to="$k" "$root/packaging/kubernetes/overlays/shards")
images:
  - name: localhost/pglock_exporter
    newTag: "$version"
patches:
  - target:
      kind: StatefulSet
      name: pglock-exporter
    patch: |-
      - op: add
        path: /spec/template/spec/hostNetwork
        value: true
configMapGenerator:
  - name: pglock-exporter-config
    behavior: replace
    files:
      - config.toml
secretGenerator:
  - name: pglock-exporter-dsn
    behavior: replace
    files:
$(printf '%s\n' "${dsn_files[@]}")
EOF
kubectl kustomize "$k" >"$work/rendered.yaml" || fail "kubectl kustomize of the test's overlay"

# What the overlay promises of its StatefulSet: as many pods as shards, a headless Service named
# in serviceName, all pods started at once, every pod's ordinal from its host name.
[[ $(grep -c '^kind: StatefulSet$' "$work/rendered.yaml") == 1 ]] || fail "not one StatefulSet"
! grep -q '^kind: Deployment$' "$work/rendered.yaml" || fail "the base's Deployment is rendered"
! grep -q '^kind: PersistentVolumeClaim$' "$work/rendered.yaml" || fail "the base's PVC is rendered"
statefulset=$(awk '/^kind: StatefulSet$/ { s = 1 } s && /^  name: / { print $2; exit }' \
  "$work/rendered.yaml")
replicas=$(sed -n 's/^  replicas: \([0-9]*\)$/\1/p' "$work/rendered.yaml")
total=$(sed -n 's/^ *- --shard\.total=\([0-9]*\)$/\1/p' "$work/rendered.yaml")
[[ -n $replicas && $replicas == "$total" ]] ||
  fail "replicas ($replicas) differ from --shard.total ($total)"
grep -q '^ *- --shard\.ordinal=auto$' "$work/rendered.yaml" || fail "no --shard.ordinal=auto"
grep -q '^  podManagementPolicy: Parallel$' "$work/rendered.yaml" ||
  fail "podManagementPolicy is not Parallel"
service=$(sed -n 's/^  serviceName: //p' "$work/rendered.yaml")
awk -v s="$service" '/^kind: Service$/ { svc = 1 } svc && $0 == "  name: " s { named = 1 }
  svc && named && /^  clusterIP: None$/ { found = 1 } /^---$/ { svc = named = 0 } END { exit !found }' \
  "$work/rendered.yaml" || fail "serviceName $service is not a headless Service of the overlay"
note "rendered: StatefulSet $statefulset, $replicas replicas = --shard.total, headless Service $service"

# --- The StatefulSet controller's part: one Pod per ordinal ----------------------------------------
# Each pod's port, picked after the servers listen, never one that another pod drew.
declare -A pod_port=() taken=()
for ((n = 0; n < replicas; n++)); do
  port=$(free_port)
  while [[ -n ${taken[$port]:-} ]]; do port=$(free_port); done
  taken[$port]=1
  pod_port[$n]=$port
  python3 tests/container/podman_compat.py "$work/rendered.yaml" "$work/pod-$n.yaml" \
    --statefulset-ordinal "$n" --listen-address "127.0.0.1:${pod_port[$n]}"
done
pod_name() { echo "$statefulset-$1"; }
play_pod() {
  timeout 120 podman kube play "$work/pod-$1.yaml" >"$work/play-$1.log" 2>&1 ||
    { cat "$work/play-$1.log"; return 1; }
}
# The exporter's sessions on TARGET's server, as the server counts them.
exporter_sessions() {
  (PG_SOCKET=$work/pg/$1/pgsocket PG_PORT=${target_port[$1]} && pg_psql -At -d postgres \
    -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pglock_exporter'")
}
scrape() { curl -sf --max-time 2 -o "$work/metrics-$1" "http://127.0.0.1:${pod_port[$1]}/metrics"; }

# The value of the unlabelled series NAME in FILE; fails when it is absent (absent is not zero).
value_of() {
  local v
  v=$(sed -n "s/^$2 \([0-9][0-9.e+]*\)$/\1/p" "$1")
  [[ -n $v ]] || { echo "no $2 in $1" >&2; return 1; }
  echo "$v"
}
# The targets with pglock_up 1 in FILE, sorted, on one line.
up_targets() {
  sed -n 's/^pglock_up{target="\([^"]*\)"} 1$/\1/p' "$1" | sort | paste -sd ' '
}
# "target shard" for every pglock_target_shard_info series in FILE, whatever the label order.
shard_info() {
  local labels
  sed -n 's/^pglock_target_shard_info{\(.*\)} 1$/\1/p' "$1" | while IFS= read -r labels; do
    [[ $labels =~ (^|,)target=\"([^\"]*)\" ]] && printf '%s ' "${BASH_REMATCH[2]}"
    [[ $labels =~ (^|,)shard=\"([^\"]*)\" ]] && printf '%s' "${BASH_REMATCH[2]}"
    echo
  done | sort
}
# Whether pod N has polled all its targets: its pglock_up series are as many as the targets it
# says it owns, every one 1.
settled() {
  scrape "$1" 2>/dev/null || return 1
  local owned
  owned=$(value_of "$work/metrics-$1" pglock_shard_targets 2>/dev/null) || return 1
  [[ $(grep -c '^pglock_up{' "$work/metrics-$1") == "$owned" &&
    $(grep -c '^pglock_up{.*} 1$' "$work/metrics-$1") == "$owned" ]]
}
wait_settled() {
  local deadline=$((SECONDS + 60)) n
  for n in "$@"; do
    until settled "$n"; do
      ((SECONDS < deadline)) && { sleep 0.2; continue; }
      podman logs "$(pod_name "$n")-pglock-exporter" 2>&1 | tail -20
      fail "$(pod_name "$n") did not poll its targets within 60 s"
    done
  done
}

# Every target polled by exactly one pod, the pod that every pod names for it, each pod at its own
# ordinal. Sets assignment[N] to pod N's targets.
assignment=()
check_full_assignment() {
  local n t owned line f
  declare -A owner=()
  for ((n = 0; n < replicas; n++)); do
    f=$work/metrics-$n
    [[ $(value_of "$f" pglock_shard_ordinal) == "$n" ]] || fail "$(pod_name "$n") is not shard $n"
    [[ $(value_of "$f" pglock_shards) == "$replicas" ]] ||
      fail "$(pod_name "$n") counts other than $replicas shards"
    assignment[n]=$(up_targets "$f")
    owned=$(value_of "$f" pglock_shard_targets)
    for t in ${assignment[$n]}; do
      [[ -z ${owner[$t]:-} ]] || fail "$t is polled by $(pod_name "${owner[$t]}") and $(pod_name "$n")"
      owner[$t]=$n
    done
    [[ $(wc -w <<<"${assignment[$n]}") == "$owned" ]] ||
      fail "$(pod_name "$n"): pglock_shard_targets $owned, pglock_up 1 for ${assignment[$n]}"
    shard_info "$f" >"$work/info-$n"
    [[ $(wc -l <"$work/info-$n") == "$servers" ]] ||
      fail "$(pod_name "$n") has $(wc -l <"$work/info-$n") pglock_target_shard_info, not $servers"
    cmp -s "$work/info-0" "$work/info-$n" ||
      fail "$(pod_name 0) and $(pod_name "$n") disagree on the shards"
  done
  for t in "${targets[@]}"; do
    [[ -n ${owner[$t]:-} ]] || fail "$t is polled by no pod"
  done
  while read -r t line; do
    [[ ${owner[$t]:-} == "$line" ]] ||
      fail "$t: pglock_target_shard_info says shard $line, polled by $(pod_name "${owner[$t]:-}")"
  done <"$work/info-0"
}

t_play=$SECONDS
play_pids=()
for ((n = 0; n < replicas; n++)); do
  play_pod "$n" &
  play_pids+=("$!")
done
for n in "${!play_pids[@]}"; do
  wait "${play_pids[$n]}" || fail "podman kube play of $(pod_name "$n")"
done
for ((n = 0; n < replicas; n++)); do
  hostname=$(podman inspect --format '{{.Config.Hostname}}' "$(pod_name "$n")-pglock-exporter")
  [[ $hostname == "$(pod_name "$n")" ]] || fail "$(pod_name "$n")'s host name is $hostname"
done
mapfile -t all_pods < <(seq 0 $((replicas - 1)))
wait_settled "${all_pods[@]}"
check_full_assignment
before=("${assignment[@]}")
note "$replicas pods played and polling, each target by one pod ($((SECONDS - t_play)) s after play)"

# --- A pod lost, as with its node ------------------------------------------------------------------
# Killed and removed at once, as a node that is gone: no graceful stop. Any ordinal would do.
lost=1
# podman says on stderr that it cannot reach systemd to drop the probes' timers (there is none).
podman pod kill "$(pod_name "$lost")" >"$work/kill.log" 2>&1 ||
  { cat "$work/kill.log"; fail "podman pod kill"; }
podman pod rm -f -t 0 "$(pod_name "$lost")" >>"$work/kill.log" 2>&1 ||
  { cat "$work/kill.log"; fail "podman pod rm"; }
! scrape "$lost" 2>/dev/null || fail "$(pod_name "$lost") still answers"
# The others keep to their own targets poll after poll: a few polls later still.
sleep 3
during=()
unpolled=" ${targets[*]} "
for n in "${all_pods[@]}"; do
  ((n == lost)) && { during[n]="(lost)"; continue; }
  scrape "$n" || fail "$(pod_name "$n") does not answer after $(pod_name "$lost") was lost"
  during[n]=$(up_targets "$work/metrics-$n")
  [[ ${during[$n]} == "${before[$n]}" ]] ||
    fail "$(pod_name "$n") polled ${before[$n]} and now ${during[$n]}"
  [[ $(shard_info "$work/metrics-$n") == "$(cat "$work/info-0")" ]] ||
    fail "$(pod_name "$n")'s pglock_target_shard_info changed"
  for t in ${during[$n]}; do unpolled=${unpolled/ $t / }; done
done
# What PglockShardTargetsUnpolled computes: the listed targets without a pglock_up.
unpolled=$(xargs -n 1 <<<"$unpolled" | sort | paste -sd ' ')
[[ $unpolled == "${before[$lost]}" ]] || fail "unpolled: $unpolled, lost pod's targets: ${before[$lost]}"
# And as the servers see it: no exporter session on the lost pod's servers (their backends end
# with the killed pod's connections), one or more on every other.
deadline=$((SECONDS + 10))
for t in "${targets[@]}"; do
  if [[ " $unpolled " == *" $t "* ]]; then
    until [[ $(exporter_sessions "$t") == 0 ]]; do
      ((SECONDS < deadline)) ||
        fail "$t's server still has exporter sessions with $(pod_name "$lost") gone"
      sleep 0.2
    done
  else
    (($(exporter_sessions "$t") > 0)) || fail "$t's server has no exporter session"
  fi
done
note "$(pod_name "$lost") lost: its targets ($unpolled) are polled by nobody (no session on their" \
  "servers), the others keep theirs"

# --- The pod played again, as the controller replaces it --------------------------------------------
t_back=$SECONDS
play_pod "$lost" || fail "podman kube play of $(pod_name "$lost") again"
wait_settled "${all_pods[@]}"
check_full_assignment
for n in "${all_pods[@]}"; do
  [[ ${assignment[$n]} == "${before[$n]}" ]] ||
    fail "$(pod_name "$n") polled ${before[$n]} before and ${assignment[$n]} after"
done
note "$(pod_name "$lost") back: the same assignment as before ($((SECONDS - t_back)) s after play)"

# Each pod's state volume holds its own targets' state only (a write every 5 s).
state_files() { find "$1" -maxdepth 1 -name '*.state.json' -printf '%f\n' | sort | paste -sd ' '; }
for n in "${all_pods[@]}"; do
  dir=$(podman volume inspect "state-$(pod_name "$n")" --format '{{.Mountpoint}}') ||
    fail "no volume state-$(pod_name "$n") for $(pod_name "$n")'s claim"
  want=$(for t in ${before[$n]}; do echo "$t.state.json"; done | sort | paste -sd ' ')
  deadline=$((SECONDS + 15))
  until [[ $(state_files "$dir") == "$want" ]]; do
    ((SECONDS < deadline)) || { ls -l "$dir"; fail "state-$(pod_name "$n") does not hold just $want"; }
    sleep 0.5
  done
done
note "each pod's own volume (state-$statefulset-N) holds the state of its own targets only"

# --- The assignment, for the record ------------------------------------------------------------------
width=10
for n in "${all_pods[@]}"; do
  if ((${#before[$n]} > width)); then width=${#before[$n]}; fi
done
# row LABEL CELL...: one phase, a cell per pod.
row() {
  local label=$1 cell
  shift
  {
    printf '%-12s' "$label"
    for cell in "$@"; do printf ' | %-*s' "$width" "$cell"; done
    echo
  } | sed 's/ *$//'
}
mapfile -t names < <(for n in "${all_pods[@]}"; do pod_name "$n"; done)
row phase "${names[@]}"
mapfile -t rules < <(for n in "${all_pods[@]}"; do printf '%*s\n' "$width" '' | tr ' ' -; done)
row ------------ "${rules[@]}" | sed 's/ | /-+-/g'
row before "${before[@]}"
row "pod $lost lost" "${during[@]}"
row after "${assignment[@]}"
note "ok in $((SECONDS - t_start)) s"
