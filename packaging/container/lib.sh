# shellcheck shell=bash
# A root filesystem made of Debian 12 packages, for the images of packaging/container/build.sh and
# tests/container/postgres_image.sh: no base image is pulled; the packages come from this
# machine's own apt sources, or as it has them installed. Sourced; needs root, mmdebstrap and
# buildah.
#
#   rootfs_extract DIR PACKAGE...   unpacks PACKAGE... and their hard dependencies into DIR with
#                                   mmdebstrap's extract variant: files only, no maintainer script
#                                   runs, so no shell or dpkg is needed in DIR. Documentation,
#                                   manual pages and translations are left out, the licenses
#                                   (/usr/share/doc/*/copyright) kept. Downloaded packages are kept
#                                   in $PGLOCK_CONTAINER_CACHE (default
#                                   /var/cache/pglock_exporter/container) for the next build.
#   rootfs_installed DIR PACKAGE... copies the files of PACKAGE..., installed on this machine, and
#                                   of the installed packages that ship the libraries their
#                                   programs load (ldd), into DIR (merged /usr); no download. For
#                                   test images of packages the test machine has anyway; the
#                                   caller runs a program of DIR in a chroot to prove it complete.
#   rootfs_finish DIR               removes apt's and dpkg's leftovers and writes ld.so.cache.
#   image_commit DIR ARCHIVE NAME BUILDAH_CONFIG_ARG...
#                                   makes an image of one layer, DIR as it is (owners and modes
#                                   kept), configured with `buildah config ARG...`, and writes it
#                                   as NAME to the OCI archive ARCHIVE. buildah works in a storage
#                                   of its own in a temporary directory, removed afterwards: the
#                                   machine's container storage is not touched.

rootfs_apt_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -s $f ]] && printf '%s\n' "$f"
  done
  return 0
}

rootfs_extract() {
  local dir=$1
  shift
  local cache=${PGLOCK_CONTAINER_CACHE:-/var/cache/pglock_exporter/container}/debs
  local sources
  mapfile -t sources < <(rootfs_apt_sources)
  ((${#sources[@]})) || { echo "rootfs: no apt sources on this machine" >&2; return 1; }
  mkdir -p "$cache"
  local IFS=,
  mmdebstrap --quiet --variant=extract --mode=root --format=directory --include="$*" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --setup-hook="mkdir -p \"\$1/var/cache/apt/archives\" && cp '$cache'/*.deb \"\$1/var/cache/apt/archives/\" 2>/dev/null || true" \
    --extract-hook="cp -n \"\$1\"/var/cache/apt/archives/*.deb '$cache'/ 2>/dev/null || true" \
    bookworm "$dir" "${sources[@]}"
}

rootfs_installed() {
  local dir=$1
  shift
  local d pkg
  for d in bin sbin lib lib64; do
    mkdir -p "$dir/usr/$d"
    ln -s "usr/$d" "$dir/$d"
  done
  mkdir -p "$dir/etc" "$dir/var" "$dir/tmp"
  chmod 1777 "$dir/tmp"
  local -A pkgs=()
  for pkg in "$@"; do pkgs[$pkg]=1; done
  # The libraries the packages' programs and modules load (ldd of their executables and shared
  # objects), and the packages that ship them, in one look-up: on a merged /usr a library found
  # in /lib may be listed under /usr/lib, and the other way round, so both are asked.
  local libs
  mapfile -t libs < <(dpkg-query -L "$@" | grep -E '/s?bin/[^/]+$|\.so(\.[0-9.]+)?$' |
    xargs -r -d '\n' ldd 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && NF > 1 { print $1 }' |
    sed -E 's|^/usr/lib/|/lib/|' | sort -u)
  while read -r pkg; do pkgs[$pkg]=1; done < <(
    dpkg-query -S "${libs[@]}" "${libs[@]/#\/lib\//\/usr\/lib\/}" 2>/dev/null | sed 's/:.*//' | tr ',' '\n' |
      sed 's/^ *//' | sort -u)
  # Every file and link of those packages but documentation, in one tar stream.
  dpkg-query -L "${!pkgs[@]}" | sort -u |
    grep -v -E '^/usr/share/(man|locale|info|lintian)/|^/usr/share/doc/.*/[^c][^/]*$' |
    while read -r f; do if [[ -L $f || (-e $f && ! -d $f) ]]; then printf '%s\n' "${f#/}"; fi; done >"$dir.files"
  tar -C / --no-recursion -cf - -T "$dir.files" | tar -C "$dir" -xf -
  rm -f "$dir.files"
}

rootfs_finish() {
  local dir=$1
  rm -rf "$dir/etc/apt" "$dir/etc/dpkg" "$dir/var/lib/apt" "$dir/var/lib/dpkg" "$dir/var/cache" \
    "$dir/var/log" "$dir/usr/share/gcc" "$dir/usr/share/gdb" "$dir/usr/share/bug"
  printf 'include /etc/ld.so.conf.d/*.conf\n' >"$dir/etc/ld.so.conf"
  ldconfig -r "$dir"
}

image_commit() {
  local dir=$1 archive=$2 name=$3
  shift 3
  local store ctr mnt rc=0
  store=$(mktemp -d /tmp/pglock_buildah_XXXXXX)
  local b=(buildah --root "$store/root" --runroot "$store/run" --storage-driver vfs)
  {
    ctr=$("${b[@]}" from --quiet scratch) &&
      mnt=$("${b[@]}" mount "$ctr") &&
      cp -a "$dir/." "$mnt/" &&
      "${b[@]}" umount "$ctr" >/dev/null &&
      "${b[@]}" config "$@" "$ctr" &&
      rm -f "$archive" &&
      "${b[@]}" commit --quiet --rm --format oci --disable-compression=false "$ctr" "oci-archive:$archive:$name" >/dev/null
  } || rc=$?
  "${b[@]}" rm --all >/dev/null 2>&1 || true
  rm -rf "$store"
  return "$rc"
}
