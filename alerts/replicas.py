#!/usr/bin/env python3
"""Writes alerts/pglock.replicas.rules.yml: the rules of alerts/pglock.rules.yml for two (or more)
exporters that poll the same targets, an availability pair, so that one incident pages once.

Each exporter of the pair judges every lock, loss and takeover itself, so each incident alert
would fire once per exporter: the series differ only by the scrape's `instance` (and a
Kubernetes `pod`). Here every alert about the databases keeps its expression, evaluated per
exporter as before, wrapped in `max without (instance, pod) (...)`: one alert per incident,
whichever exporters see it. When one exporter dies mid-incident the alert's series goes on from
the other, so it neither resolves nor fires again. The links (runbook_url, locks_url) and the
lookups in descriptions take any exporter of the job that polls the target. The alerts about
the exporters themselves (PglockTargetDown, PglockServerLogUnreadable and the shard alerts) keep
`instance`: they are about one exporter's view.

Use it only where every target name stands for one PostgreSQL server within the job (the
config's rule: one target per server): the sidecars of a replicated cluster, each calling its
local server "main", are different servers and must keep the shipped rules.

Usage: replicas.py [--check]   (--check exits 1 when the committed file differs)
"""

import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
RULES = ROOT / "alerts" / "pglock.rules.yml"
OUT = ROOT / "alerts" / "pglock.replicas.rules.yml"

# About one exporter's view, not about a database: they keep the exporter's identity.
PER_EXPORTER = {"PglockTargetDown", "PglockServerLogUnreadable", "PglockShardTargetsUnpolled",
                "PglockShardingMismatch"}
REPLICA_LABELS = "instance, pod"
# An exporter of the job that polls the target: where the links and lookups go.
# The first by name, so that the link stays the same while both run.
LIVE_EXPORTER = ('{{ with printf "pglock_up{job=%q,target=%q}" $labels.job $labels.target'
                 ' | query | sortByLabel "instance" }}{{ . | first | label "instance" }}{{ end }}')
# The one alert that refers to its own ALERTS series (it stays firing while the shape lasts):
# those series have no `instance` here, so the term takes each exporter's series that matches.
STICKY = ('ALERTS{alertname="PglockLockHoldersExhaustClientPool", alertstate="firing"}',
          '(pglock_client_idle_lock_holding_sessions and on (job, target, datname, '
          'application_name, client_addr, usename) ALERTS{alertname="PglockLockHoldersExhaustClientPool",'
          ' alertstate="firing"})')

HEADER = """\
# Made from alerts/pglock.rules.yml by alerts/replicas.py, for exporters that poll the same
# targets (docs/fleet.md, "Replicas"): every alert about the databases is wrapped in
# `max without (instance, pod)` so that one incident pages once. Edit the rules file and run that
# script; alerts/check.sh fails while the two differ.
"""


def rewrite_annotation(text):
    text = text.replace("job=%q,instance=%q,", "job=%q,").replace(
        "$labels.job $labels.instance ", "$labels.job ")
    text = text.replace("{{ $labels.instance }}", LIVE_EXPORTER)
    if "$labels.instance" in text or "instance=%q" in text:
        sys.exit(f"replicas.py: an annotation still names the instance: {text[:120]}")
    return text


def rewrite(rule):
    name = rule.get("alert")
    if name is None or name in PER_EXPORTER:
        return rule
    expr = rule["expr"].strip()
    expr = expr.replace(*STICKY)
    inner = "\n".join("  " + line for line in expr.splitlines())
    rule["expr"] = f"max without ({REPLICA_LABELS}) (\n{inner}\n)\n"
    rule["annotations"] = {k: rewrite_annotation(v) for k, v in rule.get("annotations", {}).items()}
    return rule


class Dumper(yaml.SafeDumper):
    pass


def str_presenter(dumper, data):
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


Dumper.add_representer(str, str_presenter)


def render():
    doc = yaml.safe_load(RULES.read_text())
    for group in doc["groups"]:
        group["rules"] = [rewrite(r) for r in group["rules"]]
    return HEADER + yaml.dump(doc, Dumper=Dumper, sort_keys=False, width=100, allow_unicode=True)


def main():
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit(__doc__.strip().splitlines()[-1])
    text = render()
    if sys.argv[1:] == ["--check"]:
        if not OUT.exists() or OUT.read_text() != text:
            sys.exit(f"{OUT} differs from what {RULES} makes: run alerts/replicas.py")
        return
    OUT.write_text(text)


if __name__ == "__main__":
    main()
