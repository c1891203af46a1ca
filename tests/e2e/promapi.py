#!/usr/bin/env python3
"""Reads answers of the Prometheus HTTP API for tests/e2e/alerts_live.sh.

  promapi.py count          /api/v1/query answer on stdin: the number of series in the result
  promapi.py value          /api/v1/query answer on stdin: the first sample's value, or "none"
  promapi.py groups         /api/v1/rules answer on stdin: the number of rule groups
  promapi.py alerts STATE   /api/v1/alerts answer on stdin: one line per alert in STATE
                            (firing, pending)
  promapi.py dashboards DIR
      DIR holds exprs.txt and codes.txt (one expression and the HTTP status of its query a line)
      and N.json (the answer to expression N, from 0). Prints "BAD <count>", "DATA <with data>
      <total>", then one entry per rejected expression and the expressions that returned no data.

Standard library only (Debian python3).
"""

import argparse
import json
import os
import sys


def cmd_count(_):
    print(len(json.load(sys.stdin)["data"]["result"]))


def cmd_value(_):
    r = json.load(sys.stdin)["data"]["result"]
    print(r[0]["value"][1] if r else "none")


def cmd_groups(_):
    print(len(json.load(sys.stdin)["data"]["groups"]))


def cmd_alerts(args):
    for a in json.load(sys.stdin)["data"]["alerts"]:
        if a["state"] == args.state:
            l = a["labels"]
            print("    %s %s {%s} value=%s activeAt=%s" % (
                a["state"], l.get("alertname"),
                ", ".join("%s=\"%s\"" % (k, v) for k, v in sorted(l.items()) if k != "alertname"),
                a.get("value"), a.get("activeAt")))


def read_answer(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def cmd_dashboards(args):
    d = args.dir
    with open(os.path.join(d, "exprs.txt")) as f:
        exprs = f.read().splitlines()
    with open(os.path.join(d, "codes.txt")) as f:
        codes = f.read().splitlines()
    bad, empty, data = [], [], 0
    for i, (e, code) in enumerate(zip(exprs, codes)):
        r = read_answer(os.path.join(d, "%d.json" % i))
        if code != "200" or r.get("status") != "success":
            bad.append("  HTTP %s %s: %s\n    %s" % (code, r.get("errorType", ""), r.get("error", ""), e))
            continue
        if r["data"]["resultType"] in ("vector", "matrix") and len(r["data"]["result"]) == 0:
            empty.append("    " + e)
        else:
            data += 1
    print("BAD %d" % len(bad))
    print("DATA %d %d" % (data, len(exprs)))
    for b in bad:
        print(b)
    if empty:
        print("  expressions with no data:")
        for e in empty:
            print(e)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, fn in (("count", cmd_count), ("value", cmd_value), ("groups", cmd_groups)):
        sub.add_parser(name).set_defaults(fn=fn)
    p = sub.add_parser("alerts")
    p.add_argument("state")
    p.set_defaults(fn=cmd_alerts)
    p = sub.add_parser("dashboards")
    p.add_argument("dir")
    p.set_defaults(fn=cmd_dashboards)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
