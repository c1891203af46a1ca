#!/usr/bin/env python3
"""Offline checks of the pglock Grafana dashboards (run through dashboards/check.sh):
  1. every dashboards/*.json parses and follows the house rules (stable uid, `datasource`,
     `target` and `datname` variables, description and ${datasource} on every panel and query,
     a unit on every visualisation, links to the other pglock dashboards);
  2. prints every PromQL expression, as stored, and fails if one uses a variable its dashboard
     does not define;
  3. syntax-checks each expression with `promtool check rules` (one tiny rules file per
     expression), when /usr/bin/promtool or promtool on PATH exists;
  4. optionally, with PGLOCK_PROMETHEUS_URL=http://host:9090, sends each expression (as printed
     by exprs.sh) to /api/v1/query and fails on any error.
Works from any directory. Exit status 0 only if everything passed.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

import exprs

EXPECTED_UIDS = {"pglock-overview", "pglock-advisory-waits", "pglock-leases",
                 "pglock-lock-timeline"}
DS = {"type": "prometheus", "uid": "${datasource}"}
PROVISIONED_PATH = "/var/lib/grafana/dashboards/pglock"


# Created with their first event, so that idle databases cost no series (README).
FIRST_USE_COUNTERS = ("pglock_deadlocks_total", "pglock_blocking_episodes_total")


def query_text(v):
    q = v.get("query")
    return q.get("query", "") if isinstance(q, dict) else (q or "")


def check_variables(d, err):
    variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
    v = variables.get("datasource")
    if not v or v.get("type") != "datasource" or v.get("query") != "prometheus":
        err("missing variable `datasource` of type datasource with query prometheus")
    v = variables.get("target")
    if (not v or v.get("type") != "query"
            or query_text(v).replace(" ", "") != "label_values(pglock_up,target)"
            or not v.get("multi") or not v.get("includeAll") or v.get("datasource") != DS):
        err("variable `target` must be a multi/includeAll query label_values(pglock_up, target) on ${datasource}")
    v = variables.get("datname")
    if (not v or v.get("type") != "query"
            or query_text(v).replace(" ", "")
            != 'label_values(pglock_advisory_locks_held{target=~"$target"},datname)'
            or not v.get("multi") or not v.get("includeAll") or v.get("datasource") != DS):
        err("variable `datname` must be a multi/includeAll query on pglock_advisory_locks_held")


def check_panels(d, err):
    ids = set()
    for p in exprs.panels(d.get("panels", [])):
        title = p.get("title") or f"panel id {p.get('id')}"
        where = f"panel {title!r}"
        if p.get("id") in ids:
            err(f"{where}: duplicate id {p.get('id')}")
        ids.add(p.get("id"))
        if not p.get("gridPos"):
            err(f"{where}: no gridPos")
        if not (p.get("description") or "").strip():
            err(f"{where}: no description")
        if p.get("datasource") != DS:
            err(f"{where}: datasource is {p.get('datasource')!r}, want {DS}")
        if p.get("type") == "row":
            continue
        if not p.get("fieldConfig", {}).get("defaults", {}).get("unit"):
            err(f"{where}: no unit in fieldConfig.defaults")
        targets = p.get("targets") or []
        if not targets:
            err(f"{where}: no query")
        for t in targets:
            if t.get("datasource") != DS:
                err(f"{where} query {t.get('refId')}: datasource is not ${{datasource}}")
            if not (t.get("expr") or "").strip():
                err(f"{where} query {t.get('refId')}: empty expr")


def check_dashboard(path, d, seen_uids, err):
    name = os.path.basename(path)
    uid = d.get("uid")
    if uid not in EXPECTED_UIDS:
        err(f"uid {uid!r} is not one of {sorted(EXPECTED_UIDS)}")
    if uid in seen_uids:
        err(f"uid {uid!r} also used by {seen_uids[uid]}")
    seen_uids[uid] = name
    if name != f"{uid}.json":
        err(f"file name does not match uid {uid!r}")
    if not d.get("title"):
        err("no title")
    if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 36:
        err(f"schemaVersion {d.get('schemaVersion')!r} older than Grafana 10 (36+)")
    if d.get("id") is not None:
        err("id must be null so that provisioning and import assign one")
    check_variables(d, err)
    linked = {l.get("url", "").split("/d/")[-1].split("?")[0] for l in d.get("links", [])
              if "/d/" in l.get("url", "")}
    missing = EXPECTED_UIDS - {uid} - linked
    if missing:
        err(f"no dashboard link to {sorted(missing)}")
    check_panels(d, err)
    for a in d.get("annotations", {}).get("list", []):
        if a.get("expr") and a.get("datasource") != DS:
            err(f"annotation {a.get('name')!r}: datasource is not ${{datasource}}")
    # Counters that appear with their first event (a database's deadlocks and blocking episodes):
    # increase() alone misses that first event; the expression must add the series' appearance.
    texts = [a.get("expr", "") for a in d.get("annotations", {}).get("list", [])]
    texts += [t.get("expr", "") for p in exprs.panels(d.get("panels", []))
              for t in p.get("targets", [])]
    for t in texts:
        for counter in FIRST_USE_COUNTERS:
            if f"increase({counter}" in t and "offset" not in t:
                err(f"increase() of {counter} without its first appearance (unless ... offset): {t}")
    visualisations = sum(1 for p in exprs.panels(d.get("panels", [])) if p.get("type") != "row")
    print(f"ok  {name}: uid {uid}, {visualisations} panels")


def check_structure(paths):
    """Returns the errors; prints a line for each dashboard that parses."""
    errors = []
    seen_uids = {}
    for path in paths:
        def err(msg, path=path):
            errors.append(f"{os.path.basename(path)}: {msg}")

        try:
            with open(path) as f:
                d = json.load(f)
        except (OSError, ValueError) as e:
            err(f"invalid JSON: {e}")
            continue
        check_dashboard(path, d, seen_uids, err)
    return errors


def check_provisioning_text(dash_path, ds_path):
    """Without PyYAML: the keys that matter, textually."""
    errors = []
    with open(dash_path) as f:
        text = f.read()
    for needle in ("apiVersion: 1", "type: file", "folder: pglock", f"path: {PROVISIONED_PATH}"):
        if needle not in text:
            errors.append(f"{dash_path}: missing {needle!r}")
    with open(ds_path) as f:
        if "type: prometheus" not in f.read():
            errors.append(f"{ds_path}: no prometheus data source")
    print("ok  provisioning files (textual check: PyYAML not installed)")
    return errors


def check_provisioning(dash_path, ds_path):
    try:
        import yaml
    except ImportError:
        return check_provisioning_text(dash_path, ds_path)
    errors = []
    with open(dash_path) as f:
        dash = yaml.safe_load(f)
    providers = dash.get("providers") or []
    if dash.get("apiVersion") != 1 or len(providers) != 1:
        errors.append(f"{dash_path}: want apiVersion 1 and one provider")
    for p in providers:
        if p.get("type") != "file" or p.get("folder") != "pglock":
            errors.append(f"{dash_path}: provider must be type file, folder pglock")
        if (p.get("options") or {}).get("path") != PROVISIONED_PATH:
            errors.append(f"{dash_path}: options.path must be {PROVISIONED_PATH}")
    with open(ds_path) as f:
        ds = yaml.safe_load(f)
    if ds.get("apiVersion") != 1 or not any(
            d.get("type") == "prometheus" for d in ds.get("datasources") or []):
        errors.append(f"{ds_path}: want apiVersion 1 and a prometheus data source")
    print("ok  provisioning/pglock.yaml, provisioning/datasource.example.yaml")
    return errors


def find_promtool():
    if os.access("/usr/bin/promtool", os.X_OK):
        return "/usr/bin/promtool"
    return shutil.which("promtool")


def check_promtool(promtool, expressions):
    """Returns (passed, failed)."""
    passed = failed = 0
    with tempfile.TemporaryDirectory() as work:
        for i, expr in enumerate(expressions):
            rules = os.path.join(work, f"expr_{i}.yml")
            # A literal block scalar takes the expression verbatim: no YAML escaping needed.
            with open(rules, "w") as f:
                f.write(f"groups:\n  - name: dashboard_expr_{i}\n    rules:\n"
                        f"      - record: pglock_dashboard_check\n        expr: |\n          {expr}\n")
            r = subprocess.run([promtool, "check", "rules", rules], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            if r.returncode == 0:
                passed += 1
            else:
                failed += 1
                print(f"FAIL: {expr}")
                print("      " + r.stdout.rstrip("\n").replace("\n", "\n      "))
    return passed, failed


def check_live(base, expressions):
    """True when Prometheus at BASE accepts every expression."""
    bad = 0
    for expr in expressions:
        data = urllib.parse.urlencode({"query": expr}).encode()
        try:
            with urllib.request.urlopen(base.rstrip("/") + "/api/v1/query", data=data,
                                        timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            body = json.load(e)
        if body.get("status") != "success":
            bad += 1
            print("FAIL:", expr, "->", body.get("error"))
    return bad == 0


def main():
    sys.stdout.reconfigure(line_buffering=True)  # keep stdout and stderr in order
    dashboards = exprs.all_dashboards()
    if not dashboards:
        print(f"check.sh: no dashboard JSON in {exprs.HERE}", file=sys.stderr)
        return 1

    print("== structure")
    errors = check_structure(dashboards)
    if not errors:
        print("== provisioning")
        prov = os.path.join(exprs.HERE, "provisioning")
        errors = check_provisioning(os.path.join(prov, "pglock.yaml"),
                                    os.path.join(prov, "datasource.example.yaml"))
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1

    print("== PromQL expressions")
    for line in exprs.expressions(dashboards, raw=True):
        print(line)
    try:
        expressions = list(exprs.expressions(dashboards))
    except exprs.UnknownVariable as e:
        print(e, file=sys.stderr)
        return 1
    passed = failed = 0

    promtool = find_promtool()
    if promtool:
        print("== promtool check rules (one rules file per expression)")
        passed, failed = check_promtool(promtool, expressions)
        print(f"promtool: {len(expressions)} expressions checked")
    else:
        print("== promtool not found: PromQL syntax not checked offline")

    url = os.environ.get("PGLOCK_PROMETHEUS_URL")
    if url:
        print(f"== live check against {url}/api/v1/query")
        try:
            if not check_live(url, expressions):
                failed += 1
        except (OSError, ValueError) as e:
            print(f"live check: {e}", file=sys.stderr)
            failed += 1

    print("== summary")
    print(f"dashboards: {len(dashboards)}, expressions: {len(expressions)}")
    print(f"check.sh: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
