#!/usr/bin/env python3
"""Reads the JSON-lines log written by tests/e2e/webhook.py (one Alertmanager payload per line).

  alertlog.py wait LOG --alertname NAME [--status firing|resolved] [--label K=V ...] [--timeout S]
      Waits (polling the file) until an alert with that name, status and labels appears in a
      payload; prints one JSON object {"received_at": ..., "alert": {...}} for the first such
      payload and exits 0. On timeout prints to stderr what did arrive for NAME (or everything,
      if nothing did) and exits 1.
  alertlog.py summary LOG
      One line per (alertname, status, labels): when it first arrived, and the labels.
  alertlog.py names LOG
      The alertnames seen, one per line.
  alertlog.py count LOG
      The number of payloads received.
  alertlog.py field [--epoch] KEY
      Reads one answer of `wait` on stdin; prints its received_at (KEY received_at) or a field of
      its alert (startsAt, annotations.runbook_url, ...). With --epoch, an RFC 3339 time as Unix time.

Standard library only (Debian python3).
"""

import argparse
import datetime
import json
import re
import sys
import time

IGNORED_LABELS = {"alertname"}


def payloads(path):
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except FileNotFoundError:
        return []
    out = []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            # A line still being written; the next poll sees it whole.
            if n != len(lines):
                sys.stderr.write("alertlog: %s:%d: not JSON\n" % (path, n))
    return out


def alerts(path):
    """(received_at, alert) for every alert of every payload, in arrival order."""
    for p in payloads(path):
        for a in p.get("alerts", []):
            yield p.get("x_received_at", 0.0), a


def fmt_labels(labels):
    return "{" + ", ".join(
        '%s="%s"' % (k, labels[k]) for k in sorted(labels) if k not in IGNORED_LABELS) + "}"


def describe(path, name=None, out=sys.stderr):
    seen = set()
    rows = 0
    for at, a in alerts(path):
        labels = a.get("labels", {})
        if name and labels.get("alertname") != name:
            continue
        key = (labels.get("alertname"), a.get("status"), json.dumps(labels, sort_keys=True))
        if key in seen:
            continue
        seen.add(key)
        rows += 1
        out.write("    %s %-8s %s %s startsAt=%s endsAt=%s\n" % (
            time.strftime("%H:%M:%S", time.localtime(at)) + ("%.3f" % (at % 1))[1:],
            a.get("status"), labels.get("alertname"), fmt_labels(labels),
            a.get("startsAt"), a.get("endsAt")))
    if rows == 0:
        out.write("    (nothing)\n")


def cmd_wait(args):
    want = {}
    for kv in args.label:
        k, sep, v = kv.partition("=")
        if not sep:
            sys.exit("alertlog: --label wants K=V, got %r" % kv)
        want[k] = v
    deadline = time.time() + args.timeout
    while True:
        for at, a in alerts(args.log):
            labels = a.get("labels", {})
            if labels.get("alertname") != args.alertname:
                continue
            if args.status and a.get("status") != args.status:
                continue
            if any(labels.get(k) != v for k, v in want.items()):
                continue
            print(json.dumps({"received_at": at, "alert": a}, sort_keys=True))
            return 0
        if time.time() >= deadline:
            break
        time.sleep(0.2)
    sys.stderr.write("    wanted: %s status=%s labels %s within %gs\n" % (
        args.alertname, args.status or "any", fmt_labels(want), args.timeout))
    sys.stderr.write("    the webhook received for %s:\n" % args.alertname)
    describe(args.log, args.alertname)
    sys.stderr.write("    everything the webhook received:\n")
    describe(args.log)
    return 1


def cmd_summary(args):
    describe(args.log, out=sys.stdout)
    return 0


def cmd_names(args):
    names = sorted({a.get("labels", {}).get("alertname", "") for _, a in alerts(args.log)})
    for n in names:
        print(n)
    return 0


def cmd_count(args):
    print(len(payloads(args.log)))
    return 0


def cmd_field(args):
    answer = json.load(sys.stdin)
    if args.key == "received_at":
        value = answer["received_at"]
    else:  # "startsAt", or a dotted path such as "annotations.runbook_url"
        value = answer["alert"]
        for part in args.key.split("."):
            value = value.get(part, "") if isinstance(value, dict) else ""
    if args.epoch:
        # Alertmanager prints nanoseconds and "Z": what fromisoformat reads before Python 3.11.
        value = re.sub(r"(\.\d{6})\d+", r"\1", value).replace("Z", "+00:00")
        value = datetime.datetime.fromisoformat(value).timestamp()
    print(value)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("wait")
    w.add_argument("log")
    w.add_argument("--alertname", required=True)
    w.add_argument("--status", choices=["firing", "resolved"])
    w.add_argument("--label", action="append", default=[])
    w.add_argument("--timeout", type=float, default=30)
    w.set_defaults(fn=cmd_wait)
    for name, fn in (("summary", cmd_summary), ("names", cmd_names), ("count", cmd_count)):
        p = sub.add_parser(name)
        p.add_argument("log")
        p.set_defaults(fn=fn)
    f = sub.add_parser("field")
    f.add_argument("--epoch", action="store_true")
    f.add_argument("key")
    f.set_defaults(fn=cmd_field)
    args = ap.parse_args()
    sys.exit(args.fn(args))


if __name__ == "__main__":
    main()
