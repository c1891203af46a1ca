#!/usr/bin/env python3
"""Where a build's time went: the compile and link steps of a Ninja build directory, from its
.ninja_log (scripts/build.sh builds with Ninja where it is installed), summed by kind and listed
longest first. Times are wall time per step: on a loaded machine every step stretches alike, so
compare shares, not seconds, between runs.

Usage: scripts/build_times.py BUILD_DIR [--top N]
"""

import argparse
import collections
import os
import sys


def kind(output):
    if not output.endswith(".o"):
        return "link and generated files"
    if "/pglock.dir/" in output or output.startswith("CMakeFiles/pglock.dir"):
        return "library sources (exporter/)"
    if "/unit_tests.dir/" in output:
        return "unit tests"
    if "/fuzz/" in output:
        return "fuzz targets"
    return "integration tests and test support"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    path = os.path.join(args.build, ".ninja_log")
    steps = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("#"):
                    continue
                start, end, _, output, _ = line.rstrip("\n").split("\t")
                steps[output] = (int(end) - int(start)) / 1000  # the last build of each output
    except OSError as e:
        print(f"build_times: {e} (a Ninja build directory?)", file=sys.stderr)
        return 2
    total = sum(steps.values())
    by_kind = collections.Counter()
    for output, seconds in steps.items():
        by_kind[kind(output)] += seconds
    print(f"{len(steps)} steps, {total:.0f} s of step time")
    for name, seconds in by_kind.most_common():
        print(f"  {name:<38} {seconds:7.0f} s  {100 * seconds / total:4.0f} %")
    print(f"longest {args.top}:")
    for output, seconds in sorted(steps.items(), key=lambda s: -s[1])[:args.top]:
        print(f"  {seconds:6.1f} s  {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
