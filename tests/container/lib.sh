# shellcheck shell=bash
# Podman for the container tests (tests/container/*_test.sh), with this machine's facts set only
# through files of the test's own directory, never /etc: the runc runtime (crun refuses hybrid
# cgroup mounts), vfs storage under the test's directory, the cgroupfs manager, events to a file,
# nofile and nproc lowered to 4096 (raising them needs CAP_SYS_RESOURCE), host networking, and no
# registry to pull from (short names resolve to local images only). catatonit serves as the pods'
# infra process. Sourced.
#
#   podman_setup DIR        writes DIR/{containers,storage,registries}.conf and exports
#                           CONTAINERS_CONF, CONTAINERS_STORAGE_CONF, CONTAINERS_REGISTRIES_CONF
#   podman_cleanup          removes every pod, container, volume and image of that storage, any
#                           mount left under DIR, and DIR itself (the caller's EXIT trap)
#   image_archive ARCHIVE BINARY BUILDER...
#                           runs BUILDER... unless ARCHIVE exists and is newer than BINARY
#   container_images BUILD_DIR [postgres]
#                           the images the tests load, built once for all of them into
#                           $PGLOCK_IMAGE_DIR (default BUILD_DIR/container): the exporter's
#                           (packaging/container/build.sh) unless its archive is newer than the
#                           binary, and with `postgres` the PostgreSQL 15 test image
#                           (tests/container/postgres_image.sh) unless its archive is newer than
#                           its entry point. Under a lock on the directory: tests started side by
#                           side wait for one build instead of writing the same archive at once.
#                           Sets version, image (localhost/pglock_exporter:VERSION), archive and
#                           pg_archive.
#   wait_http SECONDS URL   until URL answers 2xx (0) or SECONDS pass (1)

podman_dir=

podman_setup() {
  podman_dir=$1
  mkdir -p "$podman_dir/tmp" "$podman_dir/net"
  cat >"$podman_dir/containers.conf" <<EOF
[containers]
netns = "host"
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$podman_dir/events.log"
tmp_dir = "$podman_dir/tmp"
volume_path = "$podman_dir/root/volumes"

[network]
network_config_dir = "$podman_dir/net"
EOF
  cat >"$podman_dir/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$podman_dir/root"
runroot = "$podman_dir/run"
EOF
  printf 'unqualified-search-registries = []\nshort-name-mode = "enforcing"\n' \
    >"$podman_dir/registries.conf"
  export CONTAINERS_CONF=$podman_dir/containers.conf
  export CONTAINERS_STORAGE_CONF=$podman_dir/storage.conf
  export CONTAINERS_REGISTRIES_CONF=$podman_dir/registries.conf
}

podman_cleanup() {
  [[ -n $podman_dir && -d $podman_dir ]] || return 0
  podman pod rm --all --force --time 0 >/dev/null 2>&1 || true
  podman rm --all --force --time 0 >/dev/null 2>&1 || true
  podman volume rm --all --force >/dev/null 2>&1 || true
  podman rmi --all --force >/dev/null 2>&1 || true
  local m
  # Mounts podman may have left (a container's /dev/shm), deepest first.
  while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(
    findmnt -rn -o TARGET | grep -F "$podman_dir/" | sort -r)
  rm -rf "$podman_dir"
}

image_archive() {
  local archive=$1 binary=$2
  shift 2
  if [[ ! -s $archive || $binary -nt $archive ]]; then
    "$@" || return
  fi
  [[ -s $archive ]]
}

container_images() {
  local build_dir=$1 with=${2:-} repo image_dir
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  version=$("$build_dir/pglock_exporter" --version | awk '{ print $2 }') || return
  # shellcheck disable=SC2034 # for the caller
  image=localhost/pglock_exporter:$version
  image_dir=${PGLOCK_IMAGE_DIR:-$build_dir/container}
  archive=$image_dir/pglock_exporter-$version.oci.tar
  pg_archive=$image_dir/pglock-postgres-15.oci.tar
  mkdir -p "$image_dir"
  (
    flock 9
    image_archive "$archive" "$build_dir/pglock_exporter" \
      "$repo/packaging/container/build.sh" "$build_dir" "$image_dir" || exit
    if [[ $with == postgres ]]; then
      image_archive "$pg_archive" "$repo/tests/container/postgres-entrypoint.sh" \
        "$repo/tests/container/postgres_image.sh" "$image_dir" || exit
    fi
  ) 9>"$image_dir/.lock"
}

wait_http() {
  local deadline=$((SECONDS + $1))
  while ((SECONDS < deadline)); do
    curl -sf -o /dev/null --max-time 2 "$2" && return 0
    sleep 0.2
  done
  return 1
}
