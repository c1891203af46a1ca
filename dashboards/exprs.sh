#!/usr/bin/env bash
# Prints every PromQL expression of the pglock dashboards (panel targets and annotations), one per
# line, ready to be sent to Prometheus' /api/v1/query: dashboard variables ($target, $datname,
# $table, ...) become `.*`, and $__rate_interval / $__interval / $__range become `1m`.
#
# Usage: dashboards/exprs.sh [DASHBOARD.json ...]   (default: every dashboards/*.json)
# With --raw, prints the expressions as stored, prefixed by "<file> | <panel title> | ".
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
raw=0
if [[ "${1:-}" == "--raw" ]]; then
  raw=1
  shift
fi
if [[ $# -eq 0 ]]; then
  set -- "$here"/*.json
fi

exec python3 - "$raw" "$@" <<'PY'
import json
import os
import re
import sys

raw = sys.argv[1] == "1"
BUILTIN = re.compile(r"\$\{?__(rate_interval|interval|range)\}?")
VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)")


def panels(items):
    for p in items:
        yield p
        yield from panels(p.get("panels", []))


for path in sys.argv[2:]:
    with open(path) as f:
        dash = json.load(f)
    names = {v["name"] for v in dash.get("templating", {}).get("list", [])}
    found = []
    for p in panels(dash.get("panels", [])):
        for t in p.get("targets", []):
            if t.get("expr"):
                found.append((p.get("title", ""), t["expr"]))
    for a in dash.get("annotations", {}).get("list", []):
        if a.get("expr"):
            found.append(("annotation: " + a.get("name", ""), a["expr"]))
    for title, expr in found:
        expr = " ".join(expr.split())
        if raw:
            print(f"{os.path.basename(path)} | {title} | {expr}")
            continue
        expr = BUILTIN.sub("1m", expr)

        def var(m):
            name = m.group(1) or m.group(2)
            if name not in names:
                sys.exit(f"{path}: {title}: unknown variable ${name} in {expr}")
            return ".*"

        expr = VARIABLE.sub(var, expr)
        print(expr)
PY
