#!/usr/bin/env python3
"""Writes a pglock_exporter config for a test, a benchmark or the demo: the packaged example
(packaging/config.toml, comments and all, so what users start from is what the tests run) with
the [web] and [poll] keys and the target's name and DSN the caller sets, then the target's lock
names, lease tables, poolers and server log. --named-locks adds the two lock names the alert
tests, the on-call page test and the demo share.

  example_config.py --name e2e --dsn "host=... dbname=postgres" --poll interval=1s \\
      --named-locks --lock name=job-loop,key_text=job-loop --lease public.leases:holder_parts \\
      --pooler "pgbouncer=host=... dbname=pgbouncer" \\
      --server-log path=/tmp/x/pgdata/log,format=jsonlog > config.toml
"""
import argparse
import pathlib
import re
import sys

PACKAGED = pathlib.Path(__file__).resolve().parents[2] / "packaging" / "config.toml"

# report-daily: pg_advisory_lock(7742, hashtext('report-daily')); rebuild:run:
# pg_try_advisory_lock(hashtextextended('rebuild:run', 0)).
NAMED_LOCKS = ["name=report-daily,key1=7742,key2_text=report-daily",
               "name=rebuild:run,key_text=rebuild:run"]
# The holder pattern of the packaged lease example: "host:pid:..." holders.
HOLDER_PARTS = ["holder_pattern = '^([^:]+):([0-9]+):'",
                'holder_labels = ["holder_host", "holder_pid"]']


def toml_value(text):
    """A TOML value: integers and booleans as they are, durations and the rest as strings."""
    if re.fullmatch(r"-?[0-9]+|true|false", text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def set_keys(lines, section, values):
    """Sets `values` (key -> TOML value) in `section`, replacing the packaged value or adding it."""
    start = lines.index(section)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    todo = dict(values)
    for i in range(start + 1, end):
        m = re.match(r"([a-z_]+)\s*=", lines[i])
        if m and m.group(1) in todo:
            lines[i] = f"{m.group(1)} = {todo.pop(m.group(1))}"
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # add after the section's last line, before the blank line that ends it
    lines[end:end] = [f"{k} = {v}" for k, v in todo.items()]


def block(table, pairs):
    return ["", f"  [[targets.{table}]]"] + [f"  {line}" for line in pairs]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--name", required=True, help="the target's name (its `target` label)")
    p.add_argument("--dsn", required=True)
    p.add_argument("--comment", default="", help="a first line saying who wrote the file")
    p.add_argument("--web", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--poll", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--named-locks", action="store_true")
    p.add_argument("--lock", action="append", default=[], metavar="KEY=VALUE,...")
    p.add_argument("--lease", action="append", default=[], metavar="TABLE[:holder_parts]")
    p.add_argument("--pooler", action="append", default=[], metavar="NAME=ADMIN_DSN")
    p.add_argument("--server-log", metavar="KEY=VALUE,...",
                   help="the target's [targets.server_log] (path=...,format=...)")
    a = p.parse_args()

    lines = PACKAGED.read_text().splitlines()
    if any(x.startswith("interval=") for x in a.poll) and \
            not any(x.startswith("timeout=") for x in a.poll):
        # Unset, the timeout is min(3s, interval), as when the test writes no [poll] timeout.
        lines = [line for line in lines if not re.match(r"timeout\s*=", line)]
    for section, pairs in (("[web]", a.web), ("[poll]", a.poll)):
        if pairs:
            set_keys(lines, section, {k: toml_value(v) for k, v in (x.split("=", 1) for x in pairs)})
    set_keys(lines, "[[targets]]", {"name": toml_value(a.name), "dsn": toml_value(a.dsn)})
    for spec in (NAMED_LOCKS if a.named_locks else []) + a.lock:
        lines += block("locks", [f"{k} = {toml_value(v)}"
                                 for k, v in (kv.split("=", 1) for kv in spec.split(","))])
    for spec in a.lease:
        table, _, option = spec.partition(":")
        lines += block("leases", [f"table = {toml_value(table)}"] +
                       (HOLDER_PARTS if option == "holder_parts" else []))
    for spec in a.pooler:
        name, admin_dsn = spec.split("=", 1)
        lines += block("poolers", [f"name = {toml_value(name)}",
                                   f"admin_dsn = {toml_value(admin_dsn)}"])
    if a.server_log:
        # A table, not an array of tables: it comes last, after the target's arrays.
        pairs = (kv.split("=", 1) for kv in a.server_log.split(","))
        lines += ["", "  [targets.server_log]"] + [f"  {k} = {toml_value(v)}" for k, v in pairs]
    if a.comment:
        lines.insert(0, f"# {a.comment}")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
