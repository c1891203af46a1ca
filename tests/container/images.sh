#!/usr/bin/env bash
# The images the container tests load, built before they run side by side (scripts/test.sh): the
# exporter's (packaging/container/build.sh) and the PostgreSQL 15 test image
# (tests/container/postgres_image.sh), into $PGLOCK_IMAGE_DIR (default BUILD_DIR/container), each
# unless its archive is up to date (tests/container/lib.sh, container_images). A test run alone
# builds what it needs itself.
# Usage: tests/container/images.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=$(cd "${1:-build}" && pwd)
if ((EUID != 0)); then
  echo "images: SKIP: needs root (mmdebstrap, buildah; CI runs as root)"
  exit 0
fi
# shellcheck source=tests/container/lib.sh
. tests/container/lib.sh
container_images "$build_dir" postgres || { echo "images: FAIL: building the images" >&2; exit 1; }
echo "images: $archive ($(stat -c %s "$archive") bytes), $pg_archive ($(stat -c %s "$pg_archive") bytes)"
