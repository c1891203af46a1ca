#!/usr/bin/env bash
# The Kubernetes manifests rendered and checked without a cluster: packaging/kubernetes/base and
# every overlay, rendered with `kubectl kustomize`; every object valid against the Kubernetes and
# Prometheus Operator schemas (npm packages kubernetes-models and
# @kubernetes-models/prometheus-operator, installed into a cache outside the clone) and hardened
# as the manifests promise (tests/container/validate_manifests.mjs); the PrometheusRule made from
# alerts/pglock.rules.yml and equal to it, its groups through `promtool check rules` and the
# rules' promtool tests; every dashboard a ConfigMap labelled for Grafana's sidecar.
# Usage: tests/container/manifests_test.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

fail() { echo "manifests test: FAIL: $*" >&2; exit 1; }
note() { echo "manifests test: $*"; }
for tool in kubectl node npm promtool; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/install-deps.sh test)"
done
work=$(mktemp -d /tmp/pglock_manifests_XXXXXX)
trap 'rm -rf "$work"' EXIT

if [[ -n ${PGLOCK_NPM_CACHE:-} ]]; then
  npm_dir=$PGLOCK_NPM_CACHE
elif ((EUID == 0)); then
  npm_dir=/var/cache/pglock_exporter/npm-manifests
else
  npm_dir=${XDG_CACHE_HOME:-$HOME/.cache}/pglock_exporter/npm-manifests
fi
packages=(kubernetes-models@5.1.0 @kubernetes-models/prometheus-operator@6.0.0 js-yaml@4.1.0)
if [[ $(cat "$npm_dir/.installed" 2>/dev/null) != "${packages[*]}" ]]; then
  mkdir -p "$npm_dir"
  npm install --no-save --no-audit --no-fund --silent --prefix "$npm_dir" "${packages[@]}" ||
    fail "npm install ${packages[*]}"
  echo "${packages[*]}" >"$npm_dir/.installed"
fi

packaging/kubernetes/prometheusrule.py --check || fail "the PrometheusRule is not the rules file's"
mkdir -p "$work/alerts/tests"
cp alerts/tests/pglock.rules.test.yml "$work/alerts/tests/"
for dir in packaging/kubernetes/base packaging/kubernetes/overlays/*/; do
  dir=${dir%/}
  name=${dir##*/}
  kubectl kustomize "$dir" >"$work/$name.yaml" || fail "kubectl kustomize $dir"
  note "$dir: $(grep -c '^kind:' "$work/$name.yaml") objects"
  rm -f "$work/alerts/pglock.rules.yml"
  node tests/container/validate_manifests.mjs "$npm_dir/node_modules" "$work/$name.yaml" \
    alerts/pglock.rules.yml "$work/alerts/pglock.rules.yml" | sed 's/^/  /' ||
    fail "$dir: an object is invalid (see above)"
  [[ -s $work/alerts/pglock.rules.yml ]] || fail "$dir has no PrometheusRule"
  promtool check rules "$work/alerts/pglock.rules.yml" >/dev/null || fail "$dir: promtool check rules"
  for f in dashboards/*.json; do
    grep -q "^  ${f##*/}: |" "$work/$name.yaml" || fail "$dir: no ConfigMap holds $f"
  done
  dashboards=(dashboards/*.json)
  [[ $(grep -c '^    grafana_dashboard: "1"$' "$work/$name.yaml") == "${#dashboards[@]}" ]] ||
    fail "$dir: not every dashboard ConfigMap is labelled grafana_dashboard: \"1\""
done
# The groups are equal in every render (checked above): the rules' own tests, run once on them.
promtool test rules "$work/alerts/tests/pglock.rules.test.yml" >/dev/null ||
  fail "promtool test rules on the PrometheusRule's groups"
note "the PrometheusRule's groups pass promtool check rules and the rules' tests"
note "ok"
