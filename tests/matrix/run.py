#!/usr/bin/env python3
"""Runs integration test binaries against several PostgreSQL majors side by side.

Each (major, test) pair is one process with its own throwaway server on a free port in its own
temporary directory (tests/support), so pairs share nothing and run in parallel: the longest
first, --jobs at a time. The tests mostly wait on real time (polls, timeouts, sleeps), so more
pairs than cores run at once keep the cores busy without starving any test; the parallel run is
part of what every test must pass.

Usage: tests/matrix/run.py --build BUILD --majors "14 16" --tests "events_test timeline_test"
                           [--jobs N] [--shards NAME=N ...]
A binary named in --shards runs as N processes (gtest's GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX),
each with a server of its own, so that one long binary does not set the length of the run.
Prints one line per pair as it ends and gtest's summary of each; exits 1 if any pair failed,
after printing its log's last lines.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Seconds one process of each binary (one shard of a sharded one) took at the last run, in the
# build directory: only the order of the queue (longest first) depends on them; an unknown binary
# goes first.
COST_FILE = "matrix_costs.txt"


def bindir(major):
    """The server binaries of `major` (scripts/lib/pg_binaries.sh fetches and caches them)."""
    out = subprocess.run([os.path.join(REPO, "scripts/lib/pg_binaries.sh"), major],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        return None
    return out.stdout.strip()


def load_costs(build):
    costs = {}
    try:
        with open(os.path.join(build, COST_FILE), encoding="utf-8") as f:
            for line in f:
                name, seconds = line.split()
                costs[name] = float(seconds)
    except (OSError, ValueError):
        pass
    return costs


def save_costs(build, costs):
    """Only the next run's order depends on them: a failure to write them is a warning."""
    try:
        with open(os.path.join(build, COST_FILE), "w", encoding="utf-8") as f:
            for name, seconds in sorted(costs.items()):
                f.write(f"{name} {seconds:.1f}\n")
    except OSError as e:
        sys.stderr.write(f"matrix: the run times were not kept: {e}\n")


def summary(log):
    """gtest's closing lines of a log: what passed and what was skipped."""
    lines = []
    for line in log.splitlines():
        if line.startswith(("[  PASSED  ]", "[  SKIPPED ]", "[  FAILED  ]")) and \
                not line.endswith(" ms)"):
            lines.append(line)
    return lines


def run_pair(build, logs, pair, jobs_env):
    major, test, shard, shards, directory = pair
    env = dict(os.environ, PGLOCK_PG_BINDIR=directory, PGLOCK_PG_MAJOR=major, **jobs_env)
    if shards > 1:
        env["GTEST_TOTAL_SHARDS"] = str(shards)
        env["GTEST_SHARD_INDEX"] = str(shard)
    name = f"{test}" + (f"[{shard + 1}/{shards}]" if shards > 1 else "")
    log_path = os.path.join(logs, f"pg{major}-{test}-{shard}.log")
    started = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        try:
            rc = subprocess.run([os.path.join(build, "tests", test)], stdout=log, stderr=subprocess.STDOUT,
                                env=env, timeout=900, check=False).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout (900 s)"
    seconds = time.monotonic() - started
    with open(log_path, encoding="utf-8", errors="replace") as log:
        text = log.read()
    return major, test, name, rc, seconds, text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True)
    parser.add_argument("--majors", required=True)
    parser.add_argument("--tests", required=True)
    parser.add_argument("--jobs", type=int, default=2 * (os.cpu_count() or 1))
    parser.add_argument("--shards", nargs="*", default=[])
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    shards = {k: int(v) for k, v in (s.split("=") for s in args.shards)}

    failed = []
    pairs = []
    for major in args.majors.split():
        directory = bindir(major)
        if directory is None:
            failed.append(f"PostgreSQL {major}: no server binaries")
            continue
        print(f"=== PostgreSQL {major}: {directory}", flush=True)
        for test in args.tests.split():
            n = shards.get(test, 1)
            pairs.extend((major, test, i, n, directory) for i in range(n))
    costs = load_costs(build)
    pairs.sort(key=lambda p: -costs.get(p[1], 1e9))

    logs = tempfile.mkdtemp(prefix="pglock_matrix_")
    started = time.monotonic()
    new_costs = dict(costs)
    seen = set()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_pair, build, logs, p, {}) for p in pairs]
        for f in as_completed(futures):
            major, test, name, rc, seconds, text = f.result()
            status = "passed" if rc == 0 else f"FAILED ({rc})"
            print(f"PostgreSQL {major} {name}: {status} in {seconds:.0f}s", flush=True)
            for line in summary(text):
                print(f"    {line}")
            if rc != 0:
                failed.append(f"PostgreSQL {major} {name}")
                print("\n".join(text.splitlines()[-80:]))
            else:
                new_costs[test] = max(seconds, new_costs.get(test, 0) if test in seen else 0)
                seen.add(test)
    save_costs(build, new_costs)
    elapsed = time.monotonic() - started
    if failed:
        print(f"matrix: {len(failed)} failed in {elapsed:.0f}s: {', '.join(failed)}  (logs: {logs})")
        return 1
    print(f"matrix: {len(pairs)} runs passed on PostgreSQL {args.majors} in {elapsed:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
