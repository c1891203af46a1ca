#!/usr/bin/env python3
"""Reads Prometheus' /api/v1/alerts answer on stdin and prints one line for scripts/demo.sh:
"firing: A, 2xB | pending: -" (alert names, with a count where an alert has several series).
"""

import collections
import json
import sys


def main():
    alerts = json.load(sys.stdin)["data"]["alerts"]
    by_state = collections.defaultdict(collections.Counter)
    for a in alerts:
        by_state[a["state"]][a["labels"]["alertname"]] += 1

    def fmt(state):
        c = by_state[state]
        return ", ".join("%dx%s" % (n, k) if n > 1 else k for k, n in sorted(c.items())) or "-"

    print("firing: %s | pending: %s" % (fmt("firing"), fmt("pending")))


if __name__ == "__main__":
    main()
