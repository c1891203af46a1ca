#!/usr/bin/env bash
# The whole test suite, on a fresh Debian machine: installs what is missing, builds, then runs
# unit tests, integration tests against real PostgreSQL servers started in temporary directories
# (Debian's 15, then 14, 16, 17, 18, 12 and 13: tests/matrix/run.sh), the end-to-end tests of the
# binary, the alert rule tests (promtool), the dashboard checks, the metric name check (code vs
# alerts, dashboards and README), the Debian package test, and the container image and the
# Kubernetes manifests under podman.
# Usage: scripts/test.sh [--quick]   (--quick skips the sanitizer build and the fuzzing)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
quick=0
[[ ${1:-} == --quick ]] && quick=1

start=$(date +%s)
step() { printf '\n=== %s (%ss)\n' "$*" "$(($(date +%s) - start))"; }

step "dependencies"
scripts/install-deps.sh test

step "format check"
if command -v clang-format >/dev/null; then
  unformatted=$(find exporter tests -name '*.cc' -o -name '*.h' | while read -r f; do
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || echo "$f"; done)
  if [[ -n $unformatted ]]; then
    echo "not clang-formatted:"; echo "$unformatted"; exit 1
  fi
fi

step "build"
BUILD_DIR=build scripts/build.sh -DPGLOCK_BUILD_TESTS=ON

step "unit and integration tests (ctest)"
export PGLOCK_REQUIRE_PROMTOOL=1
export PGLOCK_EXPORTER_BINARY=$root/build/pglock_exporter
# No reruns: a test passes the first time, or it is a defect to fix.
(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 900)

step "integration tests on PostgreSQL ${PGLOCK_PG_VERSIONS:-14 16 17 18 12 13} (tests/matrix/run.sh)"
tests/matrix/run.sh build

if [[ -x alerts/check.sh ]]; then
  step "alert rules: promtool check rules + test rules"
  alerts/check.sh
fi
if [[ -x dashboards/check.sh ]]; then
  step "dashboards"
  dashboards/check.sh >/dev/null
  echo "dashboards ok"
fi
step "metric names: code vs alert rules, dashboards and README"
scripts/check_metric_names_test.py -q
scripts/check_metric_names.py
step "links between README.md and docs/"
scripts/check_doc_links.py
for t in tests/e2e/*.sh; do
  [[ -x $t ]] || continue
  step "end-to-end: $t"
  "$t"
done

step "package: cpack -G DEB, dpkg -i, the installed exporter, dpkg --purge"
tests/package/package_test.sh build

step "Kubernetes manifests: kubectl kustomize, schemas, promtool (tests/container/manifests_test.sh)"
tests/container/manifests_test.sh
# The images are built once (packaging/container/build.sh, into build/container) by the first test
# that needs them; the next reuses them.
step "container: the image under podman (tests/container/container_test.sh)"
tests/container/container_test.sh build
step "container: the sidecar overlay under podman kube play (tests/container/kube_play_test.sh)"
tests/container/kube_play_test.sh build

if ((quick == 0)); then
  step "sanitizer build (address, undefined) and tests"
  BUILD_DIR=build-asan BUILD_TYPE=Debug scripts/build.sh -DPGLOCK_BUILD_TESTS=ON -DPGLOCK_SANITIZE=ON
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 PGLOCK_EXPORTER_BINARY=$root/build-asan/pglock_exporter \
     ctest --output-on-failure -j "$(nproc)" --timeout 900)
fi

if ((quick == 0)); then
  step "fuzzing (libFuzzer, ${FUZZ_SECONDS:-20}s per target)"
  tests/fuzz/run.sh
fi

step "all tests passed"
