#!/usr/bin/env python3
"""Prints every PromQL expression of the pglock dashboards (panel targets and annotations), one per
line, ready to be sent to Prometheus' /api/v1/query: dashboard variables ($target, $datname,
$table, ...) become `.*`, and $__rate_interval / $__interval / $__range become `1m`.

Usage: dashboards/exprs.sh [--raw] [DASHBOARD.json ...]   (default: every dashboards/*.json)
With --raw, prints the expressions as stored, prefixed by "<file> | <panel title> | ".
dashboards/check.py imports it.
"""

import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BUILTIN = re.compile(r"\$\{?__(rate_interval|interval|range)\}?")
VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)")


class UnknownVariable(Exception):
    """An expression names a variable its dashboard does not define."""


def all_dashboards():
    return sorted(glob.glob(os.path.join(HERE, "*.json")))


def panels(items):
    for p in items:
        yield p
        yield from panels(p.get("panels", []))


def stored(dash):
    """(title, expression) of every expression of a dashboard, white space folded."""
    found = []
    for p in panels(dash.get("panels", [])):
        for t in p.get("targets", []):
            if t.get("expr"):
                found.append((p.get("title", ""), t["expr"]))
    for a in dash.get("annotations", {}).get("list", []):
        if a.get("expr"):
            found.append(("annotation: " + a.get("name", ""), a["expr"]))
    return [(title, " ".join(expr.split())) for title, expr in found]


def expressions(paths, raw=False):
    """Yields the lines to print. Raises UnknownVariable (after the lines before it)."""
    for path in paths:
        with open(path) as f:
            dash = json.load(f)
        names = {v["name"] for v in dash.get("templating", {}).get("list", [])}
        for title, expr in stored(dash):
            if raw:
                yield f"{os.path.basename(path)} | {title} | {expr}"
                continue
            expr = BUILTIN.sub("1m", expr)

            def var(m):
                name = m.group(1) or m.group(2)
                if name not in names:
                    raise UnknownVariable(f"{path}: {title}: unknown variable ${name} in {expr}")
                return ".*"

            yield VARIABLE.sub(var, expr)


def main():
    args = sys.argv[1:]
    raw = bool(args) and args[0] == "--raw"
    if raw:
        args = args[1:]
    try:
        for line in expressions(args or all_dashboards(), raw):
            print(line)
    except UnknownVariable as e:
        sys.exit(str(e))


if __name__ == "__main__":
    main()
