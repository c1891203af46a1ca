#!/usr/bin/env python3
"""Writes packaging/kubernetes/base/prometheusrule.yaml, the Prometheus Operator's PrometheusRule
made from alerts/pglock.rules.yml: the rules file's text, every line indented under `spec:`, so
that its groups, comments and formatting are the rules file's own. Kustomize cannot read a file
outside its directory nor wrap one in an object, hence this file; --check exits 1 when the
committed one differs from what the rules file makes (tests/container/kube_test.sh runs it).

Usage: prometheusrule.py [--check]
"""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
RULES = ROOT / "alerts" / "pglock.rules.yml"
OUT = ROOT / "packaging" / "kubernetes" / "base" / "prometheusrule.yaml"

HEADER = """\
# Made from alerts/pglock.rules.yml by packaging/kubernetes/prometheusrule.py: edit the rules file
# and run that script; the tests fail while the two differ.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: pglock-exporter
spec:
"""


def render(rules_text):
    for line in rules_text.splitlines():
        # Indenting keeps the YAML's structure unless it has document markers or directives.
        if line.startswith(("---", "...", "%")):
            sys.exit(f"{RULES}: a document marker or directive cannot be indented: {line}")
    body = "".join(("  " + line if line.strip() else "") + "\n" for line in rules_text.splitlines())
    return HEADER + body


def main():
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit(__doc__.strip().splitlines()[-1])
    want = render(RULES.read_text())
    if sys.argv[1:] == ["--check"]:
        have = OUT.read_text() if OUT.exists() else ""
        if have != want:
            sys.exit(f"{OUT.relative_to(ROOT)} differs from {RULES.relative_to(ROOT)}: "
                     "run packaging/kubernetes/prometheusrule.py")
        return
    OUT.write_text(want)


if __name__ == "__main__":
    main()
