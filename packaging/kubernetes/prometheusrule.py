#!/usr/bin/env python3
"""Writes the Prometheus Operator's PrometheusRules made from the rules files:
packaging/kubernetes/base/prometheusrule.yaml from alerts/pglock.rules.yml, and
packaging/kubernetes/overlays/replicas/prometheusrule.yaml from alerts/pglock.replicas.rules.yml
(a patch that replaces the base's spec). Each is the rules file's text, every line indented under
`spec:`, so that its groups, comments and formatting are the rules file's own. Kustomize cannot
read a file outside its directory nor wrap one in an object, hence this file; --check exits 1 when
a committed one differs from what its rules file makes (tests/container/manifests_test.sh runs
it).

Usage: prometheusrule.py [--check]
"""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
KUBE = ROOT / "packaging" / "kubernetes"

OBJECT = """\
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: pglock-exporter
spec:
"""

# (rules file, PrometheusRule file, what goes before the indented rules)
OUTPUTS = [
    (ROOT / "alerts" / "pglock.rules.yml", KUBE / "base" / "prometheusrule.yaml", """\
# Made from alerts/pglock.rules.yml by packaging/kubernetes/prometheusrule.py: edit the rules file
# and run that script; the tests fail while the two differ.
""" + OBJECT),
    (ROOT / "alerts" / "pglock.replicas.rules.yml",
     KUBE / "overlays" / "replicas" / "prometheusrule.yaml", """\
# Made from alerts/pglock.replicas.rules.yml by packaging/kubernetes/prometheusrule.py: edit
# alerts/pglock.rules.yml, run alerts/replicas.py, then that script; the tests fail while the two
# differ. A patch of the base's PrometheusRule: `$patch: replace` swaps its whole spec, the shipped
# rules, for the replicas' (a merge would keep the base's groups and fields these lack).
""" + OBJECT + "  $patch: replace\n"),
]


def render(rules, header):
    rules_text = rules.read_text()
    for line in rules_text.splitlines():
        # Indenting keeps the YAML's structure unless it has document markers or directives.
        if line.startswith(("---", "...", "%")):
            sys.exit(f"{rules}: a document marker or directive cannot be indented: {line}")
    body = "".join(("  " + line if line.strip() else "") + "\n" for line in rules_text.splitlines())
    return header + body


def main():
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit(__doc__.strip().splitlines()[-1])
    stale = []
    for rules, out, header in OUTPUTS:
        want = render(rules, header)
        if sys.argv[1:] == ["--check"]:
            have = out.read_text() if out.exists() else ""
            if have != want:
                stale.append(f"{out.relative_to(ROOT)} differs from {rules.relative_to(ROOT)}")
        else:
            out.write_text(want)
    if stale:
        sys.exit("\n".join(stale) + ": run packaging/kubernetes/prometheusrule.py")


if __name__ == "__main__":
    main()
