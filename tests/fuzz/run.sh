#!/usr/bin/env bash
# Runs each libFuzzer target for FUZZ_SECONDS (default 20) from the starting corpus in
# tests/fuzz/corpus plus the regression inputs. A crash, leak, timeout or out-of-memory fails the
# run and leaves the input in BUILD_DIR/findings/.
# Usage: tests/fuzz/run.sh [BUILD_DIR]
#   BUILD_DIR  a clang build configured with -DPGLOCK_FUZZ=ON (scripts/test.sh's sanitizer build,
#              build-asan, is one); its targets are brought up to date. Default: build-fuzz, made
#              here with clang if needed. For a long run: FUZZ_SECONDS=3600 tests/fuzz/run.sh
# FUZZ_SEED (default 1) fixes libFuzzer's random choices, so that a run in CI goes the same way
# each time from the same corpus; a long exploratory run should set another (FUZZ_SEED=0: random).
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${FUZZ_SECONDS:-20}
build=${1:-build-fuzz}
targets=(config_fuzz duration_fuzz labels_fuzz holder_fuzz keys_fuzz state_fuzz)
if [[ ! -f $build/CMakeCache.txt ]]; then
  CXX=clang++ BUILD_DIR=$build scripts/build.sh -DPGLOCK_FUZZ=ON -DPGLOCK_BUILD_TESTS=OFF
elif ! grep -q '^PGLOCK_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
  echo "fuzz: $build was not configured with -DPGLOCK_FUZZ=ON" >&2
  exit 2
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
mkdir -p "$build/findings"
status=0
for t in "${targets[@]}"; do
  work=$build/corpus/$t
  mkdir -p "$work"
  cp -n tests/fuzz/corpus/$t/* "$work"/ 2>/dev/null || true
  prefix=config; [[ $t == holder_fuzz ]] && prefix=holder
  for r in tests/fuzz/regressions/${prefix}_*; do
    [[ -e $r ]] && cp -n "$r" "$work"/ 2>/dev/null || true
  done
  if "$build/tests/fuzz/$t" -max_total_time="$seconds" -max_len=4096 -timeout=5 -seed="${FUZZ_SEED:-1}" \
       -rss_limit_mb=1024 -artifact_prefix="$build/findings/$t-" "$work" \
       >"$build/$t.log" 2>&1; then
    echo "fuzz $t: $(grep -E '^Done' "$build/$t.log" | tail -1)"
  else
    echo "fuzz $t: FAILED"; tail -40 "$build/$t.log"; status=1
  fi
done
exit $status
