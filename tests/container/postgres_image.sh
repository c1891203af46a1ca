#!/usr/bin/env bash
# Builds the PostgreSQL 15 image of the container tests offline from Debian 12 packages, and with
# buildah as packaging/container/build.sh builds the exporter's: the files of the packages
# postgresql-15, dash (initdb runs its bootstrap through /bin/sh) and tzdata as this machine has
# them installed (scripts/install-deps.sh test installs them), with the packages of the libraries
# they load, without the JIT (LLVM); user 999 (postgres). Nothing is downloaded: unpacking the
# packages with mmdebstrap took 2 to 4 minutes on a new machine, most of it fetching LLVM.
# Entry point: tests/container/postgres-entrypoint.sh.
# Output: OUT_DIR/pglock-postgres-15.oci.tar, an OCI archive of localhost/pglock-postgres:15.
# Usage: tests/container/postgres_image.sh OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=packaging/container/lib.sh
. "$here/../../packaging/container/lib.sh"
out_dir=${1:?usage: $0 OUT_DIR}
start=$(date +%s.%N)
work=$(mktemp -d /tmp/pglock_pgimage_XXXXXX)
trap 'rm -rf "$work"' EXIT
r=$work/rootfs

rootfs_installed "$r" postgresql-15 dash tzdata
rm -rf "$r"/usr/lib/x86_64-linux-gnu/libLLVM* "$r"/usr/lib/postgresql/15/lib/llvmjit* \
  "$r"/usr/lib/postgresql/15/lib/bitcode "$r"/usr/lib/x86_64-linux-gnu/gconv
printf 'root:x:0:0:root:/root:/bin/sh\npostgres:x:999:999::/var/lib/postgresql:/bin/sh\n' >"$r/etc/passwd"
printf 'root:x:0:\npostgres:x:999:\n' >"$r/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$r/etc/nsswitch.conf"
install -d -o 999 -g 999 -m 0775 "$r/var/run/postgresql" "$r/var/lib/postgresql"
install -D -m 0755 "$here/postgres-entrypoint.sh" "$r/usr/local/bin/postgres-entrypoint.sh"
rootfs_finish "$r"
# Every library resolves inside the root, with nothing of the host's.
chroot "$r" /usr/lib/postgresql/15/bin/postgres --version >/dev/null ||
  { echo "postgres_image.sh: the server does not run in its root" >&2; exit 1; }
chroot "$r" /usr/lib/postgresql/15/bin/initdb --version >/dev/null

mkdir -p "$out_dir"
archive=$out_dir/pglock-postgres-15.oci.tar
image_commit "$r" "$archive" localhost/pglock-postgres:15 \
  --entrypoint '["/usr/local/bin/postgres-entrypoint.sh"]' --cmd '["postgres"]' \
  --user 999:999 --env PGDATA=/var/lib/postgresql/data --port 5432/tcp --stop-signal SIGINT \
  --env PATH=/usr/lib/postgresql/15/bin:/usr/bin:/bin
printf 'postgres_image.sh: %s: %s bytes uncompressed, %s as an OCI archive; %.1f s\n' "$archive" \
  "$(du -sb "$r" | cut -f1)" "$(stat -c %s "$archive")" \
  "$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { print e - s }')"
