#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy) over exporter/ with the build's compile_commands.json; fails on
# any finding.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
[[ -f $build_dir/compile_commands.json ]] || BUILD_DIR=$build_dir scripts/build.sh
files=$(find exporter -name '*.cc' ! -path '*/compat/*')
printf '%s\n' $files | xargs -P "$(nproc)" -n 4 clang-tidy -p "$build_dir" --quiet 2>/dev/null
