#!/usr/bin/env bash
# Configures and builds into $BUILD_DIR (default: build). Extra arguments go to cmake's configure
# step, e.g. scripts/build.sh -DPGLOCK_SANITIZE=ON. $CXX picks the compiler (default: c++).
#
# Compiles go through ccache when it is installed, with its cache outside the checkout
# ($PGLOCK_CCACHE_DIR, default /var/cache/pglock_exporter/ccache as root, else
# ~/.cache/pglock_exporter/ccache) and paths taken relative to the checkout, so that a fresh clone
# in another folder on the same machine reuses what an earlier one compiled. PGLOCK_CCACHE=0
# turns it off. Depend mode (CCACHE_DEPEND): a miss takes the included files from the compile's
# own -MD output instead of running the preprocessor first, a second pass over every translation
# unit (0.19 s of CPU each on average for the release build's 175, more for clang's: measured
# with `-E` over every seventh source, docs/development.md). Ninja drives the build when it is installed (its log, build/.ninja_log, times
# every compile: docs/development.md, "Where CI's time goes").
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build_dir=${BUILD_DIR:-build}
args=(-DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}")
if [[ ${PGLOCK_CCACHE:-1} != 0 ]] && command -v ccache >/dev/null; then
  if [[ -z ${PGLOCK_CCACHE_DIR:-} ]]; then
    if ((EUID == 0)); then PGLOCK_CCACHE_DIR=/var/cache/pglock_exporter/ccache
    else PGLOCK_CCACHE_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/pglock_exporter/ccache; fi
  fi
  mkdir -p "$PGLOCK_CCACHE_DIR"
  # In the launcher itself, so that a later `cmake --build` by hand caches the same way.
  args+=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_DIR=$PGLOCK_CCACHE_DIR;CCACHE_BASEDIR=$root;CCACHE_NOHASHDIR=1;CCACHE_DEPEND=1;CCACHE_MAXSIZE=6G;ccache")
fi
# A build directory keeps the generator it was made with.
if [[ ! -f $build_dir/CMakeCache.txt ]] && command -v ninja >/dev/null; then args+=(-G Ninja); fi
cmake -S . -B "$build_dir" "${args[@]}" "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
