#!/usr/bin/env python3
"""Measurements of tests/bench/scale.sh: what one running exporter costs and sends.

  scale.py measure --url URL --pid PID --name NAME --targets N --interval S --window S
                   --scrapes N [--backends-cmd CMD] --out TSV
      Waits until every target is up and two more poll rounds have passed, then appends one row
      (CMD, a shell command, prints the pids of the exporter's backends separated by commas):
      series and bytes of one /metrics scrape (plain and gzip), RSS and threads of the exporter,
      CPU per poll round (schedstat) of the exporter and of its PostgreSQL backends over a window without
      scrapes, poll durations, lease tables up, and scrape latency (sequential scrapes with
      Accept-Encoding: gzip, as Prometheus asks).
  scale.py report --tsv TSV --out MD --header TEXT
      Writes the rows as a markdown table.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import time
import urllib.request

FIELDS = [
    "scenario", "targets", "databases", "series", "bytes", "gzip_bytes", "rss_mb", "threads",
    "cpu_ms_per_round", "server_cpu_ms_per_round", "poll_ms_median", "poll_ms_max",
    "lease_tables_up", "scrape_p50_ms", "scrape_p99_ms",
]


def fetch(url, gzip=False):
    """(body, seconds, whether the body came gzip-compressed)."""
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if gzip else {})
    start = time.perf_counter()
    with urllib.request.urlopen(req, timeout=300) as r:  # 200 targets of an old binary: tens of MB
        body = r.read()
        compressed = r.headers.get("Content-Encoding") == "gzip"
    return body, time.perf_counter() - start, compressed


def samples(text):
    """(name, labels text, value) of every sample line."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, _, labels = head.partition("{")
        out.append((name, labels, float(value)))
    return out


def cpu_seconds(pid):
    """CPU time of every thread of pid (schedstat: nanoseconds, unlike the 10 ms ticks of stat)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended meanwhile
    return total / 1e9


def status(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return line.split()[1]
    return "0"


def measure(a):
    deadline = time.time() + 600
    while True:
        s = samples(fetch(a.url)[0].decode())
        up = sum(1 for n, _, v in s if n == "pglock_up" and v == 1)
        if up >= a.targets:
            break
        if time.time() > deadline:
            sys.exit(f"{a.name}: only {up} of {a.targets} targets up")
        time.sleep(1)
    time.sleep(2 * a.interval)
    backends = []
    if a.backends_cmd:
        for attempt in range(5):  # psql may meet a server busy with 200 new connections
            out = subprocess.run(a.backends_cmd, shell=True, capture_output=True, text=True)
            if out.returncode == 0:
                break
            time.sleep(1)
        else:
            sys.exit(f"{a.name}: cannot list the exporter's backends: {out.stderr.strip()}")
        backends = [p for p in out.stdout.strip().split(",") if p]
    def server_cpu():
        total = 0.0
        for p in backends:
            try:
                total += cpu_seconds(p)
            except OSError:
                pass
        return total
    c0, s0 = cpu_seconds(a.pid), server_cpu()
    time.sleep(a.window)
    c1, s1 = cpu_seconds(a.pid), server_cpu()
    rounds = a.window / a.interval
    body = fetch(a.url)[0]
    gz, _, compressed = fetch(a.url, gzip=True)
    s = samples(body.decode())
    polls = [v * 1000 for n, _, v in s if n == "pglock_poll_duration_seconds"]
    tables = [v for n, _, v in s if n == "pglock_lease_table_up"]
    latencies = sorted(fetch(a.url, gzip=True)[1] * 1000 for _ in range(a.scrapes))
    row = {
        "scenario": a.name, "targets": a.targets, "databases": a.databases,
        "series": len(s), "bytes": len(body), "gzip_bytes": len(gz) if compressed else "-",
        "rss_mb": f"{int(status(a.pid, 'VmRSS')) / 1024:.1f}", "threads": status(a.pid, "Threads"),
        "cpu_ms_per_round": f"{(c1 - c0) * 1000 / rounds:.1f}",
        "server_cpu_ms_per_round": f"{(s1 - s0) * 1000 / rounds:.1f}" if backends else "",
        "poll_ms_median": f"{statistics.median(polls):.1f}", "poll_ms_max": f"{max(polls):.1f}",
        "lease_tables_up": f"{int(sum(tables))}/{len(tables)}",
        "scrape_p50_ms": f"{latencies[len(latencies) // 2]:.1f}",
        "scrape_p99_ms": f"{latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]:.1f}",
    }
    new = not os.path.exists(a.out)
    with open(a.out, "a", newline="") as f:
        w = csv.DictWriter(f, FIELDS, delimiter="\t")
        if new:
            w.writeheader()
        w.writerow(row)
    print("\t".join(str(row[k]) for k in FIELDS))


def report(a):
    with open(a.tsv) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    lines = [a.header, "", "| " + " | ".join(FIELDS) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(FIELDS))) + "|"]
    for r in rows:
        cells = []
        for k in FIELDS:
            v = r[k]
            if k in ("series", "bytes", "gzip_bytes") and v.isdigit():
                v = f"{int(v):,}"
            cells.append(v)
        lines.append("| " + " | ".join(cells) + " |")
    with open(a.out, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    for k in ("url", "name", "out"):
        m.add_argument("--" + k, required=True)
    for k in ("pid", "targets", "databases", "scrapes"):
        m.add_argument("--" + k, type=int, required=True)
    for k in ("interval", "window"):
        m.add_argument("--" + k, type=float, required=True)
    m.add_argument("--backends-cmd", default="")
    r = sub.add_parser("report")
    for k in ("tsv", "out", "header"):
        r.add_argument("--" + k, required=True)
    a = p.parse_args()
    measure(a) if a.cmd == "measure" else report(a)


if __name__ == "__main__":
    main()
