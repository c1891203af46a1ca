#!/usr/bin/env bash
# Offline checks of the pglock Grafana dashboards:
#   1. every dashboards/*.json parses and follows the house rules (stable uid, `datasource`,
#      `target` and `datname` variables, description and ${datasource} on every panel and query,
#      a unit on every visualisation, links to the other pglock dashboards);
#   2. prints every PromQL expression, as stored;
#   3. syntax-checks each expression with `promtool check rules` (one tiny rules file per
#      expression), when /usr/bin/promtool or promtool on PATH exists;
#   4. optionally, with PGLOCK_PROMETHEUS_URL=http://host:9090, sends each expression (as printed
#      by exprs.sh) to /api/v1/query and fails on any error.
# Works from any directory. Exit status 0 only if everything passed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
shopt -s nullglob
dashboards=("$here"/*.json)
if [[ ${#dashboards[@]} -eq 0 ]]; then
  echo "check.sh: no dashboard JSON in $here" >&2
  exit 1
fi

echo "== structure"
python3 - "${dashboards[@]}" <<'PY'
import json
import os
import sys

EXPECTED_UIDS = {"pglock-overview", "pglock-advisory-waits", "pglock-leases"}
DS = {"type": "prometheus", "uid": "${datasource}"}
errors = []
seen_uids = {}


def err(path, msg):
    errors.append(f"{os.path.basename(path)}: {msg}")


def panels(items):
    for p in items:
        yield p
        yield from panels(p.get("panels", []))


def query_text(v):
    q = v.get("query")
    return q.get("query", "") if isinstance(q, dict) else (q or "")


for path in sys.argv[1:]:
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        err(path, f"invalid JSON: {e}")
        continue
    uid = d.get("uid")
    if uid not in EXPECTED_UIDS:
        err(path, f"uid {uid!r} is not one of {sorted(EXPECTED_UIDS)}")
    if uid in seen_uids:
        err(path, f"uid {uid!r} also used by {seen_uids[uid]}")
    seen_uids[uid] = os.path.basename(path)
    if os.path.basename(path) != f"{uid}.json":
        err(path, f"file name does not match uid {uid!r}")
    if not d.get("title"):
        err(path, "no title")
    if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 36:
        err(path, f"schemaVersion {d.get('schemaVersion')!r} older than Grafana 10 (36+)")
    if d.get("id") is not None:
        err(path, "id must be null so that provisioning and import assign one")

    variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
    v = variables.get("datasource")
    if not v or v.get("type") != "datasource" or v.get("query") != "prometheus":
        err(path, "missing variable `datasource` of type datasource with query prometheus")
    v = variables.get("target")
    if (not v or v.get("type") != "query"
            or query_text(v).replace(" ", "") != "label_values(pglock_up,target)"
            or not v.get("multi") or not v.get("includeAll") or v.get("datasource") != DS):
        err(path, "variable `target` must be a multi/includeAll query label_values(pglock_up, target) on ${datasource}")
    v = variables.get("datname")
    if (not v or v.get("type") != "query"
            or query_text(v).replace(" ", "")
            != 'label_values(pglock_advisory_locks_held{target=~"$target"},datname)'
            or not v.get("multi") or not v.get("includeAll") or v.get("datasource") != DS):
        err(path, "variable `datname` must be a multi/includeAll query on pglock_advisory_locks_held")

    linked = {l.get("url", "").split("/d/")[-1].split("?")[0] for l in d.get("links", [])
              if "/d/" in l.get("url", "")}
    missing = EXPECTED_UIDS - {uid} - linked
    if missing:
        err(path, f"no dashboard link to {sorted(missing)}")

    ids = set()
    for p in panels(d.get("panels", [])):
        title = p.get("title") or f"panel id {p.get('id')}"
        where = f"panel {title!r}"
        if p.get("id") in ids:
            err(path, f"{where}: duplicate id {p.get('id')}")
        ids.add(p.get("id"))
        if not p.get("gridPos"):
            err(path, f"{where}: no gridPos")
        if not (p.get("description") or "").strip():
            err(path, f"{where}: no description")
        if p.get("datasource") != DS:
            err(path, f"{where}: datasource is {p.get('datasource')!r}, want {DS}")
        if p.get("type") == "row":
            continue
        if not p.get("fieldConfig", {}).get("defaults", {}).get("unit"):
            err(path, f"{where}: no unit in fieldConfig.defaults")
        targets = p.get("targets") or []
        if not targets:
            err(path, f"{where}: no query")
        for t in targets:
            if t.get("datasource") != DS:
                err(path, f"{where} query {t.get('refId')}: datasource is not ${{datasource}}")
            if not (t.get("expr") or "").strip():
                err(path, f"{where} query {t.get('refId')}: empty expr")
    for a in d.get("annotations", {}).get("list", []):
        if a.get("expr") and a.get("datasource") != DS:
            err(path, f"annotation {a.get('name')!r}: datasource is not ${{datasource}}")
    print(f"ok  {os.path.basename(path)}: uid {uid}, "
          f"{sum(1 for p in panels(d.get('panels', [])) if p.get('type') != 'row')} panels")

if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
PY

echo "== provisioning"
python3 - "$here/provisioning/pglock.yaml" "$here/provisioning/datasource.example.yaml" <<'PY'
import sys

try:
    import yaml
except ImportError:
    yaml = None

dash_path, ds_path = sys.argv[1], sys.argv[2]
errors = []
if yaml is None:
    # Without PyYAML, check the keys that matter textually.
    text = open(dash_path).read()
    for needle in ("apiVersion: 1", "type: file", "folder: pglock",
                   "path: /var/lib/grafana/dashboards/pglock"):
        if needle not in text:
            errors.append(f"{dash_path}: missing {needle!r}")
    if "type: prometheus" not in open(ds_path).read():
        errors.append(f"{ds_path}: no prometheus data source")
    print("ok  provisioning files (textual check: PyYAML not installed)")
else:
    dash = yaml.safe_load(open(dash_path))
    providers = dash.get("providers") or []
    if dash.get("apiVersion") != 1 or len(providers) != 1:
        errors.append(f"{dash_path}: want apiVersion 1 and one provider")
    for p in providers:
        if p.get("type") != "file" or p.get("folder") != "pglock":
            errors.append(f"{dash_path}: provider must be type file, folder pglock")
        if (p.get("options") or {}).get("path") != "/var/lib/grafana/dashboards/pglock":
            errors.append(f"{dash_path}: options.path must be /var/lib/grafana/dashboards/pglock")
    ds = yaml.safe_load(open(ds_path))
    if ds.get("apiVersion") != 1 or not any(
            d.get("type") == "prometheus" for d in ds.get("datasources") or []):
        errors.append(f"{ds_path}: want apiVersion 1 and a prometheus data source")
    print("ok  provisioning/pglock.yaml, provisioning/datasource.example.yaml")
if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
PY

echo "== PromQL expressions"
"$here/exprs.sh" --raw "${dashboards[@]}"

mapfile -t exprs < <("$here/exprs.sh" "${dashboards[@]}")
passed=0
failed=0

promtool=""
if [[ -x /usr/bin/promtool ]]; then
  promtool=/usr/bin/promtool
elif command -v promtool >/dev/null 2>&1; then
  promtool="$(command -v promtool)"
fi

if [[ -n "$promtool" ]]; then
  echo "== promtool check rules (one rules file per expression)"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  for i in "${!exprs[@]}"; do
    rules="$work/expr_$i.yml"
    # A literal block scalar takes the expression verbatim: no YAML escaping needed.
    printf 'groups:\n  - name: dashboard_expr_%d\n    rules:\n      - record: pglock_dashboard_check\n        expr: |\n          %s\n' \
      "$i" "${exprs[$i]}" >"$rules"
    if out="$("$promtool" check rules "$rules" 2>&1)"; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
      echo "FAIL: ${exprs[$i]}"
      printf '      %s\n' "${out//$'\n'/$'\n'      }"
    fi
  done
  echo "promtool: ${#exprs[@]} expressions checked"
else
  echo "== promtool not found: PromQL syntax not checked offline"
fi

if [[ -n "${PGLOCK_PROMETHEUS_URL:-}" ]]; then
  echo "== live check against $PGLOCK_PROMETHEUS_URL/api/v1/query"
  if ! printf '%s\n' "${exprs[@]}" | python3 -c '
import json, sys, urllib.parse, urllib.request
base = sys.argv[1].rstrip("/")
bad = 0
for line in sys.stdin:
    expr = line.rstrip("\n")
    data = urllib.parse.urlencode({"query": expr}).encode()
    try:
        with urllib.request.urlopen(base + "/api/v1/query", data=data, timeout=10) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:
        body = json.load(e)
    if body.get("status") != "success":
        bad += 1
        print("FAIL:", expr, "->", body.get("error"))
sys.exit(1 if bad else 0)
' "$PGLOCK_PROMETHEUS_URL"; then
    failed=$((failed + 1))
  fi
fi

echo "== summary"
echo "dashboards: ${#dashboards[@]}, expressions: ${#exprs[@]}"
echo "check.sh: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
