#!/usr/bin/env python3
"""Load on the on-call page: CLIENTS threads fetch /locks for SECONDS while one more thread scrapes
/metrics (gzip, as Prometheus does); prints p50/p99 of each. --clients 0 measures /metrics alone. Standard library only.

  locks_load.py --url http://127.0.0.1:9716 [--clients 10] [--seconds 20]
"""

import argparse
import threading
import time
import urllib.request


def worker(url, headers, until, out):
    while time.monotonic() < until:
        start = time.monotonic()
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            r.read()
            if r.status != 200:
                raise SystemExit(f"{url}: {r.status}")
        out.append(time.monotonic() - start)


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=20)
    a = ap.parse_args()
    until = time.monotonic() + a.seconds
    locks, metrics = [], []
    threads = [threading.Thread(target=worker, args=(a.url + "/locks", {}, until, locks))
               for _ in range(a.clients)]
    threads.append(threading.Thread(
        target=worker, args=(a.url + "/metrics", {"Accept-Encoding": "gzip"}, until, metrics)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if locks:
        print(f"/locks   {a.clients} clients: {len(locks)} requests, "
              f"p50 {pct(locks, .5):.1f} ms, p99 {pct(locks, .99):.1f} ms")
    print(f"/metrics 1 client beside {a.clients} /locks clients: {len(metrics)} requests, "
          f"p50 {pct(metrics, .5):.1f} ms, p99 {pct(metrics, .99):.1f} ms")


if __name__ == "__main__":
    main()
