#!/usr/bin/env python3
"""Prints the leases table's cycle as SQL for psql to run, paced in real time:

  take the lease with the take upsert (a new holder every round), work WORK seconds, give it
  back with DELETE, and take it again at once (the DELETE and the next take are printed together,
  so one psql session runs them within milliseconds), for SECONDS seconds.

  lease_cycle.py --lease NAME --seconds S [--work 1.5] [--lease-seconds 120]

Standard library only (Debian python3).
"""

import argparse
import os
import secrets
import sys
import time

TAKE = """INSERT INTO leases (name, holder, taken_at, expires_at)
VALUES ('{name}', '{holder}', now(), now() + make_interval(secs => {secs}))
ON CONFLICT (name) DO UPDATE
  SET holder = excluded.holder, taken_at = excluded.taken_at, expires_at = excluded.expires_at
  WHERE leases.expires_at < now()
RETURNING true;"""
GIVE_BACK = "DELETE FROM leases WHERE name = '{name}' AND holder = '{holder}';"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lease", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--work", type=float, default=1.5)
    ap.add_argument("--lease-seconds", type=int, default=120)
    args = ap.parse_args()
    end = time.monotonic() + args.seconds
    holder = None
    while time.monotonic() < end:
        statements = []
        if holder:
            statements.append(GIVE_BACK.format(name=args.lease, holder=holder))
        holder = "host-c:%d:%s" % (os.getpid(), secrets.token_hex(8))
        statements.append(TAKE.format(name=args.lease, holder=holder, secs=args.lease_seconds))
        print("\n".join(statements), flush=True)
        time.sleep(args.work)
    if holder:
        print(GIVE_BACK.format(name=args.lease, holder=holder), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
