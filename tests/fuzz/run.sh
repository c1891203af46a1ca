#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (build-fuzz/) and runs each for FUZZ_SECONDS (default 20)
# from the starting corpus in tests/fuzz/corpus plus the regression inputs. A crash, leak, timeout or
# out-of-memory fails the run and leaves the input in build-fuzz/findings/. For a long run:
#   FUZZ_SECONDS=3600 tests/fuzz/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${FUZZ_SECONDS:-20}
CXX=clang++ cmake -S . -B build-fuzz -DPGLOCK_FUZZ=ON -DPGLOCK_BUILD_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=(config_fuzz duration_fuzz labels_fuzz holder_fuzz keys_fuzz)
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]}"
mkdir -p build-fuzz/findings
status=0
for t in "${targets[@]}"; do
  work=build-fuzz/corpus/$t
  mkdir -p "$work"
  cp -n tests/fuzz/corpus/$t/* "$work"/ 2>/dev/null || true
  prefix=config; [[ $t == holder_fuzz ]] && prefix=holder
  for r in tests/fuzz/regressions/${prefix}_*; do
    [[ -e $r ]] && cp -n "$r" "$work"/ 2>/dev/null || true
  done
  if build-fuzz/tests/fuzz/$t -max_total_time="$seconds" -max_len=4096 -timeout=5 \
       -rss_limit_mb=1024 -artifact_prefix=build-fuzz/findings/$t- "$work" \
       >build-fuzz/$t.log 2>&1; then
    echo "fuzz $t: $(grep -E '^Done' build-fuzz/$t.log | tail -1)"
  else
    echo "fuzz $t: FAILED"; tail -40 build-fuzz/$t.log; status=1
  fi
done
exit $status
