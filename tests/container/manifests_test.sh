#!/usr/bin/env bash
# The Kubernetes manifests rendered and checked without a cluster: packaging/kubernetes/base and
# every overlay, rendered with `kubectl kustomize`; every object valid against the Kubernetes and
# Prometheus Operator schemas (npm packages kubernetes-models and
# @kubernetes-models/prometheus-operator, installed into a cache outside the clone) and hardened
# as the manifests promise (tests/container/validate_manifests.mjs); the PrometheusRule made from
# alerts/pglock.rules.yml and equal to it (overlays/replicas: from alerts/pglock.replicas.rules.yml,
# and a StatefulSet of 2 pods polling every target, each with its own state volume), its groups
# through `promtool check rules` (the rules' promtool tests run on the equal rules files, in
# alerts/check.sh); every dashboard a ConfigMap
# labelled for Grafana's sidecar.
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

packaging/kubernetes/prometheusrule.py --check || fail "a PrometheusRule is not its rules file's"
mkdir -p "$work/alerts"
for dir in packaging/kubernetes/base packaging/kubernetes/overlays/*/; do
  dir=${dir%/}
  name=${dir##*/}
  # The availability pair pages once per incident with the replicas' rules; the rest, the shipped.
  rules=alerts/pglock.rules.yml
  [[ $name == replicas ]] && rules=alerts/pglock.replicas.rules.yml
  kubectl kustomize "$dir" >"$work/$name.yaml" || fail "kubectl kustomize $dir"
  note "$dir: $(grep -c '^kind:' "$work/$name.yaml") objects"
  rm -f "$work/$rules"
  node tests/container/validate_manifests.mjs "$npm_dir/node_modules" "$work/$name.yaml" \
    "$rules" "$work/$rules" | sed 's/^/  /' ||
    fail "$dir: an object is invalid (see above)"
  [[ -s $work/$rules ]] || fail "$dir has no PrometheusRule"
  promtool check rules "$work/$rules" >/dev/null || fail "$dir: promtool check rules"
  if [[ $name == replicas ]]; then
    # Two exporters of every target (no shard flag), each with its own state volume.
    shape=$(node -e '
      const [modules, file] = process.argv.slice(1);
      const yaml = require(require("node:path").join(modules, "js-yaml"));
      for (const d of yaml.loadAll(require("node:fs").readFileSync(file, "utf8"))) {
        if (d?.kind !== "StatefulSet") continue;
        const args = d.spec.template.spec.containers.flatMap((c) => c.args ?? []);
        const claims = (d.spec.volumeClaimTemplates ?? []).map((t) => t.metadata.name).join(",") || "none";
        const shard = args.filter((a) => a.startsWith("--shard")).length;
        console.log(`replicas ${d.spec.replicas}, volumeClaimTemplates ${claims}, --shard flags ${shard}`);
      }' "$npm_dir/node_modules" "$work/$name.yaml") || fail "$dir: reading the StatefulSet"
    want="replicas 2, volumeClaimTemplates state, --shard flags 0"
    [[ $shape == "$want" ]] || fail "$dir: the StatefulSet has ${shape:-no StatefulSet}; want $want"
    note "$dir: the StatefulSet has $shape"
  fi
  for f in dashboards/*.json; do
    grep -q "^  ${f##*/}: |" "$work/$name.yaml" || fail "$dir: no ConfigMap holds $f"
  done
  dashboards=(dashboards/*.json)
  [[ $(grep -c '^    grafana_dashboard: "1"$' "$work/$name.yaml") == "${#dashboards[@]}" ]] ||
    fail "$dir: not every dashboard ConfigMap is labelled grafana_dashboard: \"1\""
done
# Every PrometheusRule's groups equal its rules file's groups, parsed (validate_manifests.mjs,
# above): the rules' own tests (alerts/check.sh runs them on those files, in the same test run)
# hold for them as they are. Run again here, they cost 25 s of CPU each time for the same result.
note "the PrometheusRules' groups pass promtool check rules and equal the rules files that alerts/check.sh tests (shipped and replicas')"
note "ok"
