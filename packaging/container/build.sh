#!/usr/bin/env bash
# Builds the exporter's OCI image offline, from Debian 12 packages only (no base image is pulled):
# the .deb of a build directory (cpack -G DEB) says which runtime libraries the binary links
# (its Depends, from dpkg-shlibdeps); mmdebstrap unpacks those packages into an empty root, the
# binary, its TLS shims, the example config and the copyright are copied in from the .deb, and
# buildah makes the image. Nothing else: no shell, no package manager, no libc tools.
#
# The image: user 65532:65532, nothing written at run time (runs with a read-only root), EXPOSE
# 9716, the binary as entrypoint (default arguments: the example config), OCI labels.
# Output: OUT_DIR/pglock_exporter-VERSION.oci.tar, an OCI archive of localhost/pglock_exporter:VERSION
# (podman load -i FILE; skopeo copy oci-archive:FILE docker://REGISTRY/pglock_exporter:VERSION).
# Needs root (mmdebstrap --mode=root), mmdebstrap, buildah and dpkg-dev (scripts/install-deps.sh).
# Usage: packaging/container/build.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, BUILD_DIR/container)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=packaging/container/lib.sh
. "$here/lib.sh"
build_dir=$(cd "${1:-build}" && pwd)
out_dir=${2:-$build_dir/container}
uid=65532
start=$(date +%s.%N)

[[ -x $build_dir/pglock_exporter && -f $build_dir/CPackConfig.cmake ]] ||
  { echo "build.sh: $build_dir has no built pglock_exporter (scripts/build.sh)" >&2; exit 1; }
work=$(mktemp -d /tmp/pglock_image_XXXXXX)
trap 'rm -rf "$work"' EXIT

# The package, built outside the build directory (cpack writes only under -B).
(cd "$work" && cpack -G DEB --config "$build_dir/CPackConfig.cmake" -B "$work/deb" >cpack.log 2>&1) ||
  { cat "$work/cpack.log" >&2; exit 1; }
deb=$(ls "$work"/deb/*.deb)
version=$(dpkg-deb -f "$deb" Version)
# "libc6 (>= 2.34), libpq5 (>= 15~), adduser" -> libc6 libpq5 (adduser only serves postinst)
mapfile -t libs < <(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/ //g' |
  grep -v -x -e adduser -e '')
echo "build.sh: runtime packages: ${libs[*]}"
rootfs_extract "$work/rootfs" "${libs[@]}"

dpkg-deb -x "$deb" "$work/pkg"
r=$work/rootfs
install -D -m 0755 "$work/pkg/usr/bin/pglock_exporter" "$r/usr/bin/pglock_exporter"
cp -a "$work/pkg/usr/lib/pglock_exporter" "$r/usr/lib/"
install -D -m 0644 "$work/pkg/etc/pglock_exporter/config.toml" "$r/etc/pglock_exporter/config.toml"
install -D -m 0644 "$work/pkg/usr/share/doc/pglock-exporter/copyright" \
  "$r/usr/share/doc/pglock-exporter/copyright"
# libpq looks the user up (the default role name, ~/.pgpass): the numeric user gets an entry.
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\npglock_exporter:x:%s:%s::/nonexistent:/usr/sbin/nologin\n' \
  "$uid" "$uid" >"$r/etc/passwd"
printf 'root:x:0:\npglock_exporter:x:%s:\n' "$uid" >"$r/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$r/etc/nsswitch.conf"
# glibc's character set converters: libpq and the exporter never call iconv.
rm -rf "$r/usr/lib/x86_64-linux-gnu/gconv"
rootfs_finish "$r"
# Every library resolves inside the root, with nothing of the host's.
revision=$(chroot "$r" /usr/bin/pglock_exporter --version | sed -n 's/.*(revision \([0-9a-f]*\)).*/\1/p')
[[ -n $revision ]] || { echo "build.sh: the binary does not run in its root" >&2; exit 1; }

mkdir -p "$out_dir"
archive=$out_dir/pglock_exporter-$version.oci.tar
created=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" +%Y-%m-%dT%H:%M:%SZ)
label=org.opencontainers.image
image_commit "$r" "$archive" "localhost/pglock_exporter:$version" \
  --entrypoint '["/usr/bin/pglock_exporter"]' \
  --cmd '["--config.file=/etc/pglock_exporter/config.toml"]' \
  --user "$uid:$uid" --port 9716/tcp --workingdir / --stop-signal SIGTERM \
  --label "$label.title=pglock_exporter" \
  --label "$label.description=$(dpkg-deb -f "$deb" Description | head -n 1)" \
  --label "$label.source=$(dpkg-deb -f "$deb" Homepage)" \
  --label "$label.version=$version" --label "$label.revision=$revision" \
  --label "$label.created=$created" \
  --label "$label.licenses=NOASSERTION" # no license is chosen yet (packaging/debian/copyright)

printf 'build.sh: %s (localhost/pglock_exporter:%s, revision %s)\n' "$archive" "$version" "$revision"
printf 'build.sh: size %s bytes uncompressed, %s bytes as an OCI archive; %.1f s\n' \
  "$(du -sb "$r" | cut -f1)" "$(stat -c %s "$archive")" "$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { print e - s }')"
