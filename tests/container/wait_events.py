#!/usr/bin/env python3
"""Waits until the exporter's /api/v1/events shows that the session HOLDER lost lock LOCK with
evidence "log" (cause "terminated") and that the session TAKER took it over; prints both events.
Exit 0 when both are there, 1 when TIMEOUT seconds pass first (the last answer is printed).
With `across-gap`, the loss must also say it was judged across a restart of the exporter
(exporter_gap).

Usage: wait_events.py URL LOCK HOLDER_PID TAKER_PID TIMEOUT [across-gap]
"""

import json
import sys
import time
import urllib.request


def find(events, lock, holder, taker):
    lost = takeover = None
    for e in events:
        if e.get("lock") != lock:
            continue
        if e.get("kind") == "lock_lost" and e.get("previous", {}).get("pid") == holder:
            lost = e
        if e.get("kind") == "lock_takeover" and e.get("current", {}).get("pid") == taker:
            takeover = e
    return lost, takeover


def main():
    if len(sys.argv) not in (6, 7) or (len(sys.argv) == 7 and sys.argv[6] != "across-gap"):
        sys.exit(__doc__.strip().splitlines()[-1])
    across_gap = len(sys.argv) == 7
    url, lock = sys.argv[1], sys.argv[2]
    holder, taker, timeout = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    deadline = time.monotonic() + timeout
    events = []
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url, timeout=5) as r:
            events = json.load(r)["events"]
        lost, takeover = find(events, lock, holder, taker)
        if lost and takeover:
            print("lock_lost:", json.dumps(lost, sort_keys=True))
            print("lock_takeover:", json.dumps(takeover, sort_keys=True))
            problems = []
            if lost.get("evidence") != "log":
                problems.append(f"the loss rests on evidence {lost.get('evidence')!r}, not 'log'")
            if lost.get("cause") != "terminated":
                problems.append(f"the loss's cause is {lost.get('cause')!r}, not 'terminated'")
            if across_gap and "exporter_gap" not in lost:
                problems.append("the loss does not say it was judged across the exporter's gap")
            if takeover.get("previous", {}).get("pid") != holder:
                problems.append("the takeover does not name the lost holder as previous")
            for p in problems:
                print("wait_events.py:", p, file=sys.stderr)
            sys.exit(1 if problems else 0)
        time.sleep(0.5)
    print(json.dumps(events, indent=1, sort_keys=True))
    print(f"wait_events.py: no lock_lost of pid {holder} and lock_takeover by pid {taker} "
          f"of {lock} within {timeout:g} s", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
    main()
